sublet bench step --device cuda --steps 10 --warmup 3 --model resnet50 --input 3x224x224 --classes 1000 --batch-size 256
