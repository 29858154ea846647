"""How many threads each test's engine gives llama.cpp: one.

The suite runs four test processes on a 2-core machine, often beside other work, so the CPU time
spent is what sets the suite's time. Two threads cost more of it for the same work: beside two
busy loops, with OMP_WAIT_POLICY=passive as tests/conftest.py sets, the starter read 3 x 512
prompt tokens in 8.5 s of CPU on one thread and 9.8 s on two, and decoded 64 tokens in 3.0 s
and 3.65 s. Engines whose test does not choose get the same through KVSTUDIO_THREADS
(app/engine/cpu_threads.py), set in tests/conftest.py.
"""

ENGINE_THREADS = 1
