build/sublet train --device cpu --epochs 2 --limit-train 2000 --limit-test 1000 --batch-size 16 --lr 0.05
