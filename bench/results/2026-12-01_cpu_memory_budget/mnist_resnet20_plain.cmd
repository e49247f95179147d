build/sublet train --device cpu
