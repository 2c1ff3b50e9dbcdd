# passthru.tests.tensor of pytorch-rocm: a tensor operation on the CPU (run
# while the test is built: importing torch and its HIP libraries needs no
# GPU), and with `--gpu` the same on the first AMD GPU, checked against the
# CPU's result.
import sys

import torch

x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
expected = (x @ x.T + 1).sum().item()
assert expected == 1143.0, expected
print(f"torch {torch.__version__}, HIP {torch.version.hip}: CPU result {expected}")
if "--gpu" in sys.argv:
    assert torch.cuda.is_available(), "torch sees no GPU although /dev/kfd exists"
    g = x.to("cuda")
    got = (g @ g.T + 1).sum().item()
    assert got == expected, (got, expected)
    print(f"{torch.cuda.get_device_name(0)}: GPU result {got}")
