build/sublet train --device cpu --memory-budget 0.5
