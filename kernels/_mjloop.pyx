# cython: language_level=3
"""MuJoCo C calls made from compiled code without the GIL (kernels/fetch_sim.CpuStepper).

Python's ctypes drops and retakes the GIL around every foreign call, so stepping one episode
by 20 physics steps through ctypes hands the GIL over 20 times, and two worker threads queue
for it. Here the caller passes the addresses of MuJoCo's own C functions (taken from the
loaded library with ctypes) and of the mjModel / mjData, and the loop runs in C.
"""

ctypedef void (*model_data_fn)(const void* m, void* d) noexcept nogil
ctypedef void (*state_fn)(const void* m, void* d, double* state, int spec) noexcept nogil
ctypedef void (*get_state_fn)(const void* m, const void* d, double* state, int spec) noexcept nogil


def set_state_and_step(size_t set_state, size_t step, size_t model, size_t data, size_t state,
                       int spec, int nsub):
    """mj_setState(m, d, state, spec), then mj_step(m, d) nsub times."""
    cdef state_fn set_fn = <state_fn><void*>set_state
    cdef model_data_fn step_fn = <model_data_fn><void*>step
    cdef int i
    with nogil:
        set_fn(<const void*>model, <void*>data, <double*>state, spec)
        for i in range(nsub):
            step_fn(<const void*>model, <void*>data)


def kinematics_and_get_state(size_t kinematics, size_t get_state, size_t model, size_t data,
                             size_t state, int spec):
    """mj_kinematics(m, d), then mj_getState(m, d, state, spec)."""
    cdef model_data_fn kin_fn = <model_data_fn><void*>kinematics
    cdef get_state_fn get_fn = <get_state_fn><void*>get_state
    with nogil:
        kin_fn(<const void*>model, <void*>data)
        get_fn(<const void*>model, <const void*>data, <double*>state, spec)
