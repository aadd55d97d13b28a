"""cortiq: CMF v2 model files from Python, over the C library libcortiq.

    import cortiq
    with cortiq.open("model.cmf") as f:          # validated at open; shards followed
        print(f.arch["arch_name"], len(f.tensors))
        w = f.tensor("model.embed_tokens.weight")  # numpy; f16/f32 are views of the mapping
    cortiq.write("out.cmf", {"w": w}, quant="q8")
    m = cortiq.Model("model.cmf")
    print(m.chat("What is 2+2?", max_tokens=32, greedy=True))

Every computation is the C library's (codecs, writer, converter, runtime); this package only
moves numpy arrays and Python values across its public API (include/cortiq/*.h).
"""
from ._ffi import LIB_PATH as library_path
from ._file import File, Mask, TensorInfo, open
from ._model import Model
from ._write import convert, write
from .errors import (BoundsError, DtypeError, Error, FormatError, HashMismatch, InvalidArgument,
                     InvalidMagic, IOFailure, LimitError, NetworkError, NoMemory, NotFound,
                     ParseError, ShardError, Unsupported, UnsupportedFeature, UnsupportedVersion)

__version__ = "0.1.0"

__all__ = ["open", "File", "TensorInfo", "Mask", "write", "convert", "Model", "Error",
           "FormatError", "InvalidMagic", "UnsupportedVersion", "UnsupportedFeature",
           "BoundsError", "ParseError", "HashMismatch", "IOFailure", "NoMemory", "InvalidArgument",
           "NotFound", "Unsupported", "DtypeError", "ShardError", "LimitError", "NetworkError",
           "library_path"]
