build/sublet demo variable-length-oom --device cuda --model gpt-mini --block-size 1024 --seq-len-range 64:1024 --tokens-per-batch 16384 --vocab 50304
