build/sublet bench step --device cpu --model gpt-nano --vocab 4096 --seq-len-range 8:64 --tokens-per-batch 2048 --warmup 1 --steps 8 --seed 0 --alloc-conf-sweep
