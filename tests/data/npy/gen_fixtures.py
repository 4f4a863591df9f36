# Generates the small .npy fixtures in this folder: run from here with numpy installed
# (`python3 gen_fixtures.py`). tests/io.rs checks that mxbi reads them.
import numpy as np
from numpy.lib import format as fmt
np.save("f32_2x3.npy", (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1))
np.save("f64_scalar.npy", np.array(3.25, dtype="<f8"))
np.save("f16_5.npy", np.array([0.0, -1.5, 65504.0, 6e-8, np.inf], dtype="<f2"))
np.save("u8_4.npy", np.array([0, 1, 128, 255], dtype="u1"))
np.save("i8_4.npy", np.array([-128, -1, 0, 127], dtype="i1"))
np.save("u16_3.npy", np.array([0, 1000, 65535], dtype="<u2"))
np.save("i32_2x2.npy", np.array([[-2147483648, -1], [0, 2147483647]], dtype="<i4"))
np.save("i64_3.npy", np.array([-(2**63), 0, 2**63 - 1], dtype="<i8"))
np.save("f32_0x4.npy", np.zeros((0, 4), dtype="<f4"))
np.save("f32_1x1x1x2.npy", np.array([1.0, 2.0], dtype="<f4").reshape(1, 1, 1, 2))
for v in [(2, 0), (3, 0)]:
    with open("f32_v%d.npy" % v[0], "wb") as f:
        fmt.write_array(f, np.array([1.0, 2.0, 3.0], dtype="<f4"), version=v)
np.save("fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
np.save("bigendian_f4.npy", np.array([1.0, 2.0], dtype=">f4"))
np.save("bool_2.npy", np.array([True, False]))
np.save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
