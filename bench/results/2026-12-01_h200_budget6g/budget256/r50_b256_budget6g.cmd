sublet bench step --device cuda --model resnet50 --input 3x224x224 --classes 1000 --batch-size 256 --memory-budget 6GiB --steps 10 --warmup 3
