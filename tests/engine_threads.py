"""How many threads each test's engine gives llama.cpp: one.

The suite runs four test processes on a 2-core machine, often beside other work. llama.cpp's
CPU threads meet at a barrier after every operation and spin there while they wait, so an
engine with 2 threads whose second thread is waiting for a core spends its first one spinning.
Measured on this machine beside other load (the starter, 64 tokens decoded one by one): with
2 threads 103 s and 27 s of CPU, with 1 thread 20 s and 3.4 s. With 4 test processes on 2
cores, one thread each is all the machine has anyway.
"""

ENGINE_THREADS = 1
