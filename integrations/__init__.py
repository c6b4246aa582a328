"""Integrations with RL training frameworks, each in its own module, imported on demand
(``import visgym.integrations.skyrl`` registers visgym with SkyRL-Gym); nothing here is
imported by ``import visgym``."""
