"""The outside world: gymnasium bridge, command line, (later) agent loop and demo synthesis."""
