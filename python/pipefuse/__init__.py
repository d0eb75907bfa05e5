"""pipefuse: fused image-processing pipelines on CUDA and the CPU, from Python.

    import numpy as np, pipefuse
    engine = pipefuse.Engine()
    demo = engine.load("pipelines/demo.json", backend="cpu")
    out = demo.run(np.zeros((1080, 1920, 3), np.uint8))
    out["result"]      # HxWx3 uint8, like the input
    out["histogram"]   # a NumPy structured array: row, then one float64 field per column

Images are NumPy-shaped: HxW (gray) or HxWxC (C = 1..4) of uint8, uint16 or float32.
Host arrays (NumPy, anything with the buffer protocol, PyTorch CPU tensors) are read and
written where they are, or copied once through a pooled buffer when a pf_frame cannot
describe their layout (a[::-1], bgr[..., ::-1]); CUDA arrays (PyTorch, CuPy, DLPack,
__cuda_array_interface__) run on the caller's CUDA stream. read_png and write_png move
PNG files to and from arrays at full bit depth. Engine notices go to the logging module
(logger "pipefuse"). docs/python.md is the reference.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import operator
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _pipefuse as _c
from ._cli import main
from ._pipefuse import STATUS, ClosedError, Error, Ticket

__version__ = _c.__version__
__all__ = ["Engine", "Pipeline", "Stage", "Param", "OutputInfo", "Ticket", "Error", "STATUS",
           "ClosedError", "UnknownNameError", "version", "read_png", "write_png", "read_jpeg",
           "write_jpeg", "jpeg_available", "main"]

# One exception class per status (ParseError, ParamError, ShapeError, ...), all
# subclasses of Error and of the built-in a program already catches for such a failure:
# ValueError (bad values: InvalidArgument, Parse, Pipeline, Param, Image, TooLarge,
# Shape), OSError (IoError), MemoryError (NoMemoryError), TimeoutError (NotReadyError),
# NotImplementedError (UnsupportedError), RuntimeError (the rest: Busy, Stage, Cancelled,
# ...). ClosedError (a closed pipeline) is an Error and a RuntimeError.
for _name in dir(_c):
    if _name.endswith("Error") and _name not in ("Error", "ClosedError"):
        globals()[_name] = getattr(_c, _name)
        __all__.append(_name)
del _name


class UnknownNameError(KeyError):
    """A name that is not there: set()'s 'stage.param' (no such stage or parameter), an
    option's name. Raised as a subclass of the status' own class too (ParamError,
    InvalidArgumentError), so it is a KeyError and that class at once."""

    def __str__(self) -> str:  # the engine's message, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


class UnknownParamError(_c.ParamError, UnknownNameError):
    """set(), set_json(): the key names no stage, or the stage has no such parameter."""


class UnknownOptionError(_c.InvalidArgumentError, UnknownNameError):
    """load(**options), configure(): no option of that name."""


__all__ += ["UnknownParamError", "UnknownOptionError"]

# What the engine says when a name is not found (api.c set_param_value, options.c).
_UNKNOWN_MARKS = (": no stage '", "has no parameter '", "is not of the form stage_id.param",
                  "is a pipeline input, not a stage", "unknown key '")


def _unknown_name(e: Error) -> Error:
    """e as UnknownParamError or UnknownOptionError (KeyErrors, and still e's class) when
    it says that a name is unknown."""
    if not any(m in str(e) for m in _UNKNOWN_MARKS):
        return e
    sub = UnknownParamError if isinstance(e, _c.ParamError) else \
        UnknownOptionError if isinstance(e, _c.InvalidArgumentError) else None
    if sub is None:
        return e
    new = sub(*e.args)
    new.status, new.status_name = e.status, e.status_name
    return new


# ---- Notices through logging -------------------------------------------------------------

logger = logging.getLogger("pipefuse")
_LEVELS = (logging.INFO, logging.WARNING, logging.ERROR)


def _log_notice(level: int, message: str) -> None:
    """The engine's notices (0), warnings (1) and errors (2) as records of the "pipefuse"
    logger: INFO, WARNING, ERROR. Unconfigured, Python shows warnings and errors on
    sys.stderr and drops the notices; logging.basicConfig(level=logging.INFO) shows all."""
    logger.log(_LEVELS[level] if 0 <= level < len(_LEVELS) else logging.WARNING, "%s", message)


# ---- PNG files ----------------------------------------------------------------------------

def read_png(path: Union[str, bytes, os.PathLike], *, max_pixels: int = 0) -> np.ndarray:
    """A PNG file as an array at its own bit depth: uint8 or uint16 (16-bit stays 16-bit),
    HxW for gray, HxWx2 gray+alpha, HxWx3 RGB, HxWx4 RGBA (palette images become RGB or
    RGBA). max_pixels bounds width * height (0: 256 Mi pixels). Gamma and colour chunks
    are not applied. IoError (an OSError) when the file cannot be read, ImageError (a
    ValueError) when it is not a valid PNG, TooLargeError over max_pixels."""
    buf, h, w, c, bits, pitch = _c.read_png(path, int(max_pixels))
    dt = np.dtype(np.uint16 if bits == 16 else np.uint8)
    shape = (h, w) if c == 1 else (h, w, c)
    strides = (pitch, dt.itemsize) if c == 1 else (pitch, dt.itemsize * c, dt.itemsize)
    return np.ndarray(shape, dtype=dt, buffer=buf, strides=strides)


# ---- JPEG files ---------------------------------------------------------------------------

_SUBSAMPLING = {"4:2:0": 0, "4:2:2": 1, "4:4:4": 2, "4:4:0": 3}


def jpeg_available() -> bool:
    """Whether this build reads and writes JPEG (it was built with libjpeg); without it
    read_jpeg and write_jpeg raise UnsupportedError."""
    return bool(_c.jpeg_available())


def read_jpeg(path: Union[str, bytes, os.PathLike], *, max_pixels: int = 0,
              keep_orientation: bool = False) -> np.ndarray:
    """A JPEG file as a uint8 array: HxW for gray files, HxWx3 RGB for colour ones (CMYK
    and YCCK converted). The EXIF orientation is applied unless keep_orientation.
    max_pixels bounds width * height (0: 256 Mi pixels). IoError (an OSError), ImageError
    (a ValueError: not a JPEG, corrupt, truncated), TooLargeError, UnsupportedError
    (12-bit or lossless files, or no JPEG in this build)."""
    buf, h, w, c, _, pitch = _c.read_jpeg(path, int(max_pixels), bool(keep_orientation))
    shape = (h, w) if c == 1 else (h, w, c)
    strides = (pitch, 1) if c == 1 else (pitch, c, 1)
    return np.ndarray(shape, dtype=np.uint8, buffer=buf, strides=strides)


def write_jpeg(path: Union[str, bytes, os.PathLike], image: Any, *, quality: int = 85,
               subsampling: str = "4:2:0", progressive: bool = False,
               optimize: bool = False) -> None:
    """Writes an image (uint8, uint16 or float32; HxW or HxWxC, C = 1..4, any layout) as a
    JPEG: gray as gray, colour as YCbCr; 16-bit samples are rounded to 8 bits, floats
    clamped to [0, 1], alpha composited onto white. quality 1-100; subsampling "4:2:0",
    "4:2:2", "4:4:4" or "4:4:0". Written under a temporary name and renamed."""
    if subsampling not in _SUBSAMPLING:
        raise ValueError(f"write_jpeg: subsampling is one of {list(_SUBSAMPLING)}, "
                         f"not {subsampling!r}")
    a = image if isinstance(image, np.ndarray) else np.asarray(image)
    if a.dtype not in (np.uint8, np.uint16, np.float32) and not (
            a.dtype.kind in "uf" and a.dtype.newbyteorder("=") in (np.uint16, np.float32)):
        raise TypeError(f"write_jpeg: the image must be uint8, uint16 or float32, not {a.dtype}")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    _c.write_jpeg(path, a, int(quality), _SUBSAMPLING[subsampling], bool(progressive),
                  bool(optimize))


_PNG_FORMS = {"": 0, "auto": 1, "palette": 2, "gray1": 3, "gray2": 4, "gray4": 5}


def write_png(path: Union[str, bytes, os.PathLike], image: Any, *, level: int = -1,
              form: Optional[str] = None) -> None:
    """Writes a uint8 or uint16 image (HxW, HxWx1..4: gray, gray+alpha, RGB, RGBA; any
    layout NumPy describes) as a PNG of that bit depth. level: zlib 0-9, -1 libpng's
    default. form: an output's form (OutputInfo.form: "auto", the smallest lossless form;
    "palette"; "gray1", "gray2", "gray4", each sample rounded half up to the nearest
    level), so that the file holds what `pipefuse run` writes; None or "": the image's own
    depth. The file is written under a temporary name and renamed: a file at path is
    always complete, and on failure (IoError) the old one is untouched."""
    if form not in _PNG_FORMS and form is not None:
        raise ValueError(f"write_png: form {form!r}; one of " +
                         ", ".join(repr(f) for f in _PNG_FORMS if f))
    a = image if isinstance(image, np.ndarray) else np.asarray(image)
    if a.dtype.kind not in "u" or a.dtype.itemsize not in (1, 2):
        raise TypeError(f"write_png: the image must be uint8 or uint16, not {a.dtype}")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    _c.write_png(path, a, int(level), _PNG_FORMS[form or ""])

_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.float32}
_NotReady = getattr(_c, "NotReadyError", ())  # PF_NOT_READY: libraries since 0.2
_DEFAULT_SIZE = (1080, 1920)  # (height, width) that `pipefuse check` plans by default


def version() -> str:
    """The library's version string."""
    return _c.version()


@dataclass(frozen=True)
class Param:
    """A stage parameter as its plugin declares it."""
    name: str
    type: str  # float, int, bool, enum, float_array
    doc: str
    default: Any
    min: Optional[float]  # None: unbounded
    max: Optional[float]
    choices: Optional[Tuple[str, ...]]  # enum names
    count: int  # floats in a float_array, else 1


@dataclass(frozen=True)
class Stage:
    """A registered stage (pipefuse stages)."""
    name: str
    kind: str  # point, stencil, resample, reduce
    doc: str
    inputs: int
    plugin: str
    file: str
    params: Tuple[Param, ...]
    columns: Optional[Tuple[str, ...]]  # reduce stages: the table's columns


@dataclass(frozen=True)
class OutputInfo:
    """A pipeline output. shape: (height, width) of an image or (rows, columns) of a
    table once planned, (0, 0) before."""
    name: str
    stage: str
    kind: str  # image or table
    channels: int  # 0: like the first input
    bits: int  # 8, 16, 32 (float), 0: like the first input
    table_format: str  # csv, json or "" (the caller's choice)
    shape: Tuple[int, int]
    # the PNG form the pipeline declares for an image: "" (its samples as they are), auto,
    # palette, gray1, gray2 or gray4; run() returns the samples, write_png(form=) applies it
    form: str = ""


class Engine:
    """The loaded plugins. Shared freely between threads; pipelines hold it alive.

    plugin_path: extra plugin directories (a ':'-separated str or a list of paths);
    use_env_path: also search PIPEFUSE_PLUGIN_PATH; builtin: load the built-in stages;
    threads: CPU worker threads (0: one per core); log: callable(level, message) for the
    engine's notices (0 info, 1 warning, 2 error; None: the "pipefuse" logger).
    """

    def __init__(self, plugin_path: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]],
                                          None] = None, *, use_env_path: bool = True,
                 builtin: bool = True, threads: int = 0, log=None) -> None:
        # Paths as os.fspath takes them (str, bytes, PathLike), one or a list of them.
        if isinstance(plugin_path, (str, bytes, os.PathLike)):
            plugin_path = os.fsdecode(plugin_path)
        elif plugin_path is not None:
            try:
                plugin_path = ":".join(os.fsdecode(p) for p in plugin_path)
            except TypeError:
                raise TypeError(f"plugin_path: a path (str, bytes, os.PathLike), a ':'-separated "
                                f"str or a list of paths, not {plugin_path!r:.80}") from None
        self._c = _c.Engine(plugin_path, use_env_path, builtin, threads,
                            _log_notice if log is None else log)

    def stages(self) -> List[Stage]:
        """Every registered stage with its parameters, in plugin load order."""
        out = []
        for s in self._c.stages():
            params = tuple(Param(**p) for p in s.pop("params"))
            out.append(Stage(params=params, **s))
        return out

    def stage(self, name: str) -> Stage:
        """One stage by name (UnknownNameError, a KeyError, when no plugin registers it)."""
        for s in self.stages():
            if s.name == name:
                return s
        raise UnknownNameError(f"no stage named {name!r}")

    def load(self, source: Union[str, os.PathLike, Mapping[str, Any]], *,
             name: Optional[str] = None, **options: Any) -> "Pipeline":
        """Loads a pipeline: a file path, JSON text (a str starting with '{') or a dict.
        Keyword arguments are options (backend="cpu", fusion=False, threads=4, slots=2,
        graph=..., streams=..., max_launch_ms=..., profile=..., dump_kernels=...)."""
        if isinstance(source, Mapping):
            name = name or "<dict>"
            try:
                text = json.dumps(source, default=_json_value, allow_nan=False)
            except ValueError:
                found = _non_finite(source, "")
                if not found:
                    raise
                raise _status_error("PF_PARAM", f"{name}: {found[0]}: {found[1]} is not a "
                                                f"finite number") from None
            c = self._c.load_string(text, name)
        elif isinstance(source, str) and source.lstrip().startswith("{"):
            c = self._c.load_string(source, name or "<string>")
        else:
            c = self._c.load_file(os.fspath(source))
        p = Pipeline(c, self)
        p.configure(**options)
        return p

    def info(self) -> str:
        """Versions, plugins and CUDA devices, as `pipefuse info` prints them."""
        return self._c.info()

    def empty_pinned(self, shape: Sequence[int], dtype: Any = np.uint8) -> np.ndarray:
        """An uninitialised NumPy image, HxW or HxWxC, in page-locked memory
        (pf_frame_alloc_host): host frames the GPU can reach by DMA. Page-locked memory
        is scarce: allocate these once, outside the frame loop. The array keeps the
        memory (and the engine) alive."""
        shape = tuple(int(d) for d in shape)
        if len(shape) not in (2, 3):
            raise ValueError(f"an image is HxW or HxWxC; got shape {shape}")
        dt = np.dtype(dtype)
        samples = {np.dtype(np.uint8): 0, np.dtype(np.uint16): 1, np.dtype(np.float32): 2}
        if dt not in samples:
            raise TypeError(f"dtype must be uint8, uint16 or float32, not {dt}")
        h, w = shape[:2]
        c = shape[2] if len(shape) == 3 else 1
        buf = self._c.alloc_host(w, h, samples[dt], c)
        return np.frombuffer(buf, dtype=dt, count=h * w * c).reshape(shape)


def _stream_int(stream: Any) -> int:
    """A cudaStream_t as an int from an int, a torch.cuda.Stream or a cupy Stream."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(f"stream must be an int, a torch.cuda.Stream or a cupy Stream, "
                    f"not {type(stream).__name__}")


def _framework(a: Any) -> str:
    return type(a).__module__.split(".", 1)[0]


def _is_device(a: Any) -> bool:
    if _framework(a) == "torch":
        return bool(a.is_cuda)
    if hasattr(a, "__cuda_array_interface__"):
        return True
    dev = getattr(a, "__dlpack_device__", None)
    if dev is not None and not hasattr(a, "__array_interface__"):
        return dev()[0] in (2, 13)
    return False


def _default_stream(a: Any) -> int:
    """The stream a device frame runs on when none is given: the framework's current
    stream (PyTorch, CuPy), the array's own (__cuda_array_interface__), else the legacy
    default stream."""
    fw = _framework(a)
    if fw == "torch":
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        index = a.device.index or 0
        return raw(index) if raw else torch.cuda.current_stream(a.device).cuda_stream
    if fw == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai and cai.get("stream") not in (None, 1):
        return int(cai["stream"])
    return 0


def _host_array(a: Any) -> Optional[np.ndarray]:
    """What the extension makes of a host input that has no .shape: NumPy's view of its
    buffer, __array_interface__ or __array__ (no copy for the first two). None for what
    is no array (a str, nested lists: the extension says what is wrong)."""
    if isinstance(a, (str, bytes, list, tuple)) or a is None:
        return None
    try:
        return np.asarray(a)
    except Exception:  # the extension reports it, naming the input
        return None


def _held(method: Any) -> Any:
    """The pipeline is the calling thread's for the whole of method, several calls into
    the extension (plan, submit, wait): another thread gets BusyError throughout, not a
    set() slipped in between them."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kw: Any) -> Any:
        self._c._hold()
        try:
            return method(self, *args, **kw)
        finally:
            self._c._unhold()
    return call


def _host_arrays(ins: Sequence[Any]) -> Sequence[Any]:
    """Host inputs that are not NumPy arrays (Pillow images, __array__ or buffer
    exporters) as NumPy's view of them, made once: the outputs' shapes and dtypes are
    read from it and the extension reads it, where each would otherwise convert again
    (a Pillow image copies its pixels every time). What is no array of numbers stays as
    it is, for the extension to say what is wrong with it."""
    if all(type(a) is np.ndarray for a in ins):
        return ins
    out = list(ins)
    for i, a in enumerate(ins):
        if type(a) is np.ndarray or _framework(a) == "torch" or not _is_array(a):
            continue
        h = _host_array(a)
        if h is not None and h.dtype.kind in "biuf":
            out[i] = h
    return out


# Pillow modes whose samples are what the engine reads: gray, gray+alpha, RGB, RGBA
# (straight alpha), 16-bit gray, float gray. ("1" and "I" reach the dtype check.)
_PIL_MODES = ("L", "LA", "RGB", "RGBA", "I;16", "I;16L", "I;16N", "I;16B", "F", "1", "I")


def _check_pil(a: Any, name: str) -> None:
    """A Pillow image in a mode whose bytes are not gray/RGB/RGBA samples (palette
    indices, CMYK, YCbCr, premultiplied alpha...) would be read as if they were."""
    mode = getattr(a, "mode", None)
    if isinstance(mode, str) and mode not in _PIL_MODES:
        want = "RGBA" if mode in ("PA", "La", "RGBa") else "RGB"
        raise ValueError(f"input {name!r}: a Pillow image in mode {mode!r}, whose samples are "
                         f"not gray, RGB or RGBA; convert it first (image.convert({want!r}))")


def _interface(a: Any) -> Optional[Dict[str, Any]]:
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        d = getattr(a, attr, None)
        if isinstance(d, dict):
            return d
    return None


def _shape_of(a: Any) -> Optional[Tuple[int, ...]]:
    """The shape of any array the extension takes: .shape, an array interface's, else
    NumPy's view of it (buffers, __array__)."""
    if _framework(a) == "PIL" and hasattr(a, "getbands"):  # without copying its pixels
        bands = len(a.getbands())
        return (a.height, a.width) + ((bands,) if bands > 1 else ())
    shape = getattr(a, "shape", None)
    if shape is None:
        d = _interface(a)
        shape = d.get("shape") if d is not None else None
    if shape is None:
        h = _host_array(a)
        shape = h.shape if h is not None else None
    try:
        return tuple(operator.index(d) for d in shape) if shape is not None else None
    except TypeError:
        return None


def _is_array(a: Any) -> bool:
    """Whether a is an array (of any kind the extension reads), not a shape: it has a
    .shape, an array interface, __array__, __dlpack__ or the buffer protocol."""
    if isinstance(a, (str, bytes, list, tuple)) or _is_int(a):
        return False
    # On the type (or the instance's own dict): hasattr would run a property such as
    # Pillow's __array_interface__, which copies the pixels.
    own = getattr(a, "__dict__", {})
    if any(hasattr(type(a), n) or n in own for n in
           ("shape", "__array_interface__", "__cuda_array_interface__", "__array__",
            "__dlpack__")):
        return True
    try:
        memoryview(a)
    except TypeError:
        return False
    return True


def _dtype_name(a: Any) -> str:
    d = getattr(a, "dtype", None)
    if d is None:
        i = _interface(a)
        if i is not None:
            return np.dtype(i["typestr"]).name
        h = _host_array(a)
        return h.dtype.name if h is not None else "object"
    s = str(d)
    return s.rsplit(".", 1)[-1] if _framework(a) == "torch" else np.dtype(d).name


def _is_int(v: Any) -> bool:
    """An integer: an int or a scalar with __index__ (NumPy's integers), not a bool."""
    if isinstance(v, (bool, np.bool_)) or getattr(v, "ndim", 0) != 0:
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _param_value(value: Any) -> Any:
    """A parameter value as set() hands it on: bools (Python's and NumPy's) as bool,
    integers (anything with __index__) as int, other numbers (anything with __float__) as
    float, arrays and sequences as lists of those; str and the rest unchanged."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (str, bytes, Mapping)):
        return value
    if isinstance(value, np.ndarray) or (not _is_int(value) and (
            hasattr(value, "__array_interface__") or hasattr(value, "__array__"))):
        value = np.asarray(value).tolist()  # Python numbers, nested lists, or one scalar
        if isinstance(value, np.generic):  # longdouble, clongdouble: tolist() keeps them
            return float(value) if hasattr(type(value), "__float__") else value
        return [_param_value(v) for v in value] if isinstance(value, list) else \
            _param_value(value)
    if _is_int(value):
        return operator.index(value)
    if hasattr(type(value), "__float__"):
        return float(value)
    if isinstance(value, (list, tuple)) or (isinstance(value, Sequence)):
        return [_param_value(v) for v in value]
    return value


def _status_error(status_name: str, message: str) -> Error:
    """The pipefuse.Error subclass of a status, with .status and .status_name, as the
    extension raises it for a failed C call."""
    cls = next((c for c in vars(_c).values() if isinstance(c, type) and issubclass(c, Error)
                and getattr(c, "status_name", None) == status_name), Error)
    e = cls(message)
    e.status, e.status_name = STATUS.get(status_name, 0), status_name
    return e


def _non_finite(value: Any, where: str) -> Optional[Tuple[str, float]]:
    """The first NaN or infinity in a value (numbers, NumPy's too, and the lists, tuples,
    arrays and dicts of them) and where it is ("m.matrix[3]", "stages[0].params.a"):
    JSON has no such numbers, so the engine would only see text it cannot parse."""
    if isinstance(value, (float, np.floating)):
        return None if math.isfinite(value) else (where, float(value))
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        bad = np.argwhere(~np.isfinite(value))
        if not len(bad):
            return None
        i = tuple(int(k) for k in bad[0])
        return where + "".join(f"[{k}]" for k in i), float(value[i])
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for k, v in items:
        found = _non_finite(v, f"{where}[{k}]" if isinstance(k, int) else
                            f"{where}.{k}" if where else str(k))
        if found:
            return found
    return None


def _param_json(key: str, value: Any) -> Union[float, str]:
    """A parameter value as set() hands it to the extension: a number (an int or float,
    for pf_pipeline_set_float) or JSON text. The errors a value of the wrong kind gets
    name the parameter: NaN or an infinity in an array is a ParamError, as it is for one
    number; what JSON cannot hold a TypeError."""
    try:
        v = _param_value(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise type(e)(f"{key}: {e}") from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if isinstance(v, int) and abs(v) > 2 ** 1023:  # float() overflows
            raise _status_error("PF_PARAM", f"{key}: an integer of {len(str(abs(v)))} digits is "
                                            f"out of range")
        return v
    try:
        return json.dumps(v, allow_nan=False)
    except ValueError:
        found = _non_finite(v, str(key))
        if not found:
            raise
        raise _status_error("PF_PARAM", f"{found[0]}: {found[1]} is not a finite number") \
            from None
    except TypeError as e:
        raise TypeError(f"{key}: a number, bool, str, or a sequence or array of numbers, not "
                        f"{type(value).__name__} ({e})") from None


def _json_value(value: Any) -> Any:
    """json.dumps' default= for a pipeline given as a dict: NumPy's numbers, bools and
    arrays (and anything with __index__ or __float__) as set() takes them."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    v = _param_value(value)
    if v is value:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return v


def _option_value(value: Any) -> Any:
    """An option value as set_option() takes it: NumPy's bools and numbers as Python's."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _table(cols: Tuple[str, ...], rows: Optional[Tuple[str, ...]], data: bytes) -> np.ndarray:
    """A table output as a structured array: a 'row' field (the stage's row names, or
    the row index), then one float64 field per column, in the stage's order."""
    values = np.frombuffer(data, dtype=np.float64)
    n_cols = len(cols)
    values = values.reshape(-1, n_cols) if n_cols else values.reshape(0, 0)
    names, seen = [], {"row"}
    for i, c in enumerate(cols):
        c = c if c and c not in seen else f"col{i}"
        seen.add(c)
        names.append(c)
    if rows is not None:
        row_type = f"U{max([1] + [len(r) for r in rows])}"
    else:
        row_type = np.int64
    t = np.empty(values.shape[0], dtype=[("row", row_type)] + [(c, np.float64) for c in names])
    t["row"] = rows if rows is not None else np.arange(values.shape[0])
    for i, c in enumerate(names):
        t[c] = values[:, i]
    return t


class Pipeline:
    """A loaded pipeline. One thread at a time (a second thread calling in while a
    frame runs gets BusyError, a RuntimeError); load one pipeline per thread. cancel()
    is the exception: any thread, any time."""

    __slots__ = ("_c", "engine", "_names", "_kinds", "_inputs", "__weakref__")

    def __init__(self, c: Any, engine: Engine) -> None:
        self._c = c
        self.engine = engine
        info = c.output_info()
        self._names = tuple(o["name"] for o in info)
        self._kinds = tuple(o["kind"] for o in info)
        self._inputs = tuple(c.inputs)  # fixed by the load; still known after close()

    def __repr__(self) -> str:
        # What the load fixed: no call into the pipeline, which another thread may hold.
        closed = ", closed" if self._c.slots == 0 else ""
        return f"<pipefuse.Pipeline inputs={list(self._inputs)} outputs={list(self._names)}" \
               f"{closed}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A copy would share the C pipeline (closing one closes both, and a second thread
        # using the "copy" gets BusyError): a new pipeline is a new load.
        raise TypeError("a Pipeline cannot be copied or pickled: load the pipeline again "
                        "(engine.load) for another one")

    # ---- description ----
    @property
    def inputs(self) -> Tuple[str, ...]:
        """Input names, in order."""
        return self._inputs

    @property
    def outputs(self) -> List[OutputInfo]:
        """Output descriptions, in order (shapes once planned)."""
        return [OutputInfo(**o) for o in self._c.output_info()]

    @property
    def slots(self) -> int:
        """Frames that can be in flight at once."""
        return self._c.slots

    # ---- parameters and options ----
    def set(self, key: str, value: Any) -> None:
        """Sets 'stage_id.param' between frames (no re-planning unless an output shape
        changes): numbers (anything with __index__ or __float__: NumPy scalars too),
        bools, sequences or arrays of numbers, or a str for an enum ("nearest")."""
        if not isinstance(key, str):
            raise TypeError(f"set: the key is a str, 'stage_id.param', not "
                            f"{type(key).__name__}")
        v = _param_json(key, value)
        try:
            if isinstance(v, str):
                self._c.set_json(key, v)
            else:
                self._c.set(key, v)
        except Error as e:
            raise _unknown_name(e) from None

    def set_json(self, key: str, text: str) -> None:
        """Sets 'stage_id.param' from JSON text, as `pipefuse run --set` takes it."""
        try:
            self._c.set_json(key, text)
        except Error as e:
            raise _unknown_name(e) from None

    def configure(self, **options: Any) -> None:
        """Sets options: backend="auto"|"cpu"|"cuda", fusion, graph, streams, threads,
        slots, max_launch_ms, profile, precision="exact"|"fast", dump_kernels. An unknown
        name is an UnknownNameError (a KeyError)."""
        for k, v in options.items():
            try:
                self._c.set_option(k, _option_value(v))
            except Error as e:
                raise _unknown_name(e) from None

    # ---- planning ----
    def plan(self, shapes: Any) -> None:
        """Plans for input shapes (NumPy order: (height, width[, channels]), of ints or
        NumPy integers): one shape for a one-input pipeline, a list in input order, a
        dict by input name, or the arrays themselves."""
        self._c.plan(self._shapes(shapes))

    def _shapes(self, shapes: Any) -> List[Any]:
        if isinstance(shapes, Mapping):
            shapes = [shapes[n] for n in self._need(shapes)]
        elif _is_array(shapes) or (isinstance(shapes, Sequence) and shapes and
                                   _is_int(shapes[0])):
            shapes = [shapes]
        elif not isinstance(shapes, Sequence) or isinstance(shapes, (str, bytes)):
            raise TypeError(f"shapes: a (height, width[, channels]) tuple, an array, or a list "
                            f"or dict of them, not {type(shapes).__name__}")
        out = []
        for i, s in enumerate(shapes):
            if isinstance(s, (list, tuple)):
                out.append(s)  # the extension checks the numbers
            elif _is_array(s):
                out.append(_shape_of(s))
            else:
                raise TypeError(f"shape {i}: a (height, width[, channels]) tuple of ints or an "
                                f"array, not {type(s).__name__}")
        return out

    def _need(self, d: Mapping[str, Any]) -> Tuple[str, ...]:
        names = self._inputs
        extra = set(d) - set(names)
        missing = [n for n in names if n not in d]
        if extra or missing:
            raise KeyError(f"the pipeline's inputs are {list(names)}"
                           + (f"; missing {missing}" if missing else "")
                           + (f"; unknown {sorted(extra)}" if extra else ""))
        return names

    def _planned(self, shapes: Any) -> None:
        """Plans for shapes when given; with nothing planned yet, for 1920x1080 inputs as
        `pipefuse check` does by default."""
        if shapes is not None:
            self.plan(shapes)
        elif self._c.stats()["backend"] == "none":
            self._c.plan([_DEFAULT_SIZE] * len(self._inputs))

    def plan_text(self, shapes: Any = None) -> str:
        """The plan as `pipefuse check` prints it: for shapes (as plan() takes them) when
        given, else the current plan, else (nothing planned yet) for 1920x1080 inputs,
        check's default."""
        self._planned(shapes)
        return self._c.plan_text()

    def dot_text(self, shapes: Any = None) -> str:
        """The plan as a Graphviz digraph (`pipefuse check --dot`); shapes as plan_text."""
        self._planned(shapes)
        return self._c.dot_text()

    def units(self) -> List[Dict[str, Any]]:
        """The plan's launch units: kind, stages, shape, stream, bands, fused, times."""
        return self._c.units()

    def stats(self) -> Dict[str, Any]:
        """Counters: backend, frames, launches_per_frame, allocations, device_syncs, ..."""
        return self._c.stats()

    def build_kernels(self, arch: int, dump_dir: Optional[Union[str, os.PathLike]] = None) -> int:
        """Compiles the fused kernels of the current plan for sm_<arch> with NVRTC."""
        return self._c.build_kernels(arch, dump_dir) if dump_dir is not None \
            else self._c.build_kernels(arch)

    # ---- frames ----
    def _in_list(self, inputs: Any) -> Sequence[Any]:
        if isinstance(inputs, Mapping):
            return [inputs[n] for n in self._need(inputs)]
        if isinstance(inputs, (list, tuple)):
            return inputs
        return (inputs,)

    def _out_list(self, ins: Sequence[Any], outputs: Any, device: bool) -> List[Any]:
        """Output arrays in output order: the caller's, and new ones for the images not
        given (None in a dict or list: not computed)."""
        given: Dict[str, Any] = {}
        if outputs is not None and not isinstance(outputs, Mapping):
            raise TypeError(f"outputs must be None, a dict by output name or a list in output "
                            f"order, not {type(outputs).__name__} (one array for the output "
                            f"{self._names[0]!r}: [array] or {{{self._names[0]!r}: array}})"
                            if self._names else
                            f"outputs must be None, a dict or a list, not "
                            f"{type(outputs).__name__}")
        if isinstance(outputs, Mapping):
            unknown = set(outputs) - set(self._names)
            if unknown:
                raise KeyError(f"the pipeline's outputs are {list(self._names)}; "
                               f"unknown {sorted(unknown)}")
            given = dict(outputs)
        shapes = [_shape_of(a) for a in ins]
        if len(ins) != len(self._inputs) or not all(
                s is not None and len(s) in (2, 3) and min(s) > 0 for s in shapes):
            # Not frames the engine takes: submit says what is wrong with them.
            return [None] * len(self._kinds)
        first = ins[0]
        in_dtype = _dtype_name(first)
        if in_dtype not in ("uint8", "uint16", "float32"):
            return [None] * len(self._kinds)  # submit names the input and its dtype
        self._c.plan(shapes)
        in_shape = shapes[0]
        in_ch = in_shape[2] if len(in_shape) == 3 else 1
        out: List[Any] = []
        for index, info in enumerate(self._c.output_info()):
            name = info["name"]
            if info["kind"] == "table" and given.get(name) is not None:
                raise ValueError(f"output '{name}' is a table: the pipeline makes it and wait() "
                                 f"returns it; pass None for it or leave it out")
            if info["kind"] == "table" or (name in given and given[name] is None):
                out.append(None)
                continue
            if name in given:
                out.append(given[name])
                continue
            # the declared layout, else the input's widened where a stage makes colour or
            # alpha (a duotone of a gray photo is RGB), as `pipefuse run` writes it
            ch = self._c.output_channels(index, in_ch) or in_ch
            dtype = np.dtype(_DTYPES[info["bits"]]).name if info["bits"] in _DTYPES else in_dtype
            h, w = info["shape"]
            shape = (h, w) if ch == 1 and len(in_shape) == 2 else (h, w, ch)
            out.append(self._alloc(first, shape, dtype, device))
        return out

    @staticmethod
    def _alloc(like: Any, shape: Tuple[int, ...], dtype: str, device: bool) -> Any:
        if not device:
            return np.empty(shape, dtype=dtype)
        fw = _framework(like)
        if fw == "torch":
            import torch
            return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
        if fw == "cupy":
            import cupy
            with cupy.cuda.Device(like.device.id):
                return cupy.empty(shape, dtype=dtype)
        raise TypeError(f"cannot allocate device outputs like a {type(like).__name__}; pass "
                        f"outputs= (PyTorch and CuPy arrays are allocated for you)")

    @_held
    def submit(self, inputs: Any, outputs: Any = None, *, stream: Any = None) -> Ticket:
        """Submits a frame and returns its Ticket; wait(ticket) returns its outputs.

        inputs: one array (one-input pipelines), a list in input order, or a dict by
        name. outputs: None (new arrays for every image output), a dict by name (others
        allocated; None skips one), or a list in output order (None skips; nothing is
        allocated: the fastest form). Host frames with CUDA: pageable inputs are copied
        before submit returns; outputs are written by wait. Device frames (PyTorch, CuPy, DLPack,
        __cuda_array_interface__) run on `stream` (an int cudaStream_t, a torch or cupy
        stream; None: the arrays' framework's current stream) and are written in place,
        ordered on that stream.

        On the CPU backend the frame is queued on the engine's threads and submit returns
        at once: the frame reads the inputs and writes the outputs while it runs, so leave
        them unchanged until wait() (the ticket keeps them alive). A second submit first
        completes the frame before it."""
        ins = inputs if type(inputs) in (list, tuple) else self._in_list(inputs)
        for i, a in enumerate(ins):
            if type(a) is not np.ndarray and _framework(a) == "PIL":
                _check_pil(a, self._inputs[i] if i < len(self._inputs) else str(i))
        first = ins[0] if ins else None
        # NumPy arrays first: the common host case costs one type check.
        device = type(first) is not np.ndarray and first is not None and _is_device(first)
        if type(outputs) not in (list, tuple):
            if not device:
                ins = _host_arrays(ins)
            outputs = self._out_list(ins, outputs, device)
        if stream is None:
            stream = _default_stream(first) if device else 0
        elif type(stream) is not int:
            stream = _stream_int(stream)
        if not device and self._c.inflight:
            self._complete_cpu_frames()
        return self._c.submit(ins, outputs, stream)

    def _complete_cpu_frames(self) -> None:
        """The CPU queues one frame: a submit would first complete the one in flight,
        uninterruptibly inside the engine. Waiting for it here keeps Ctrl-C working; its
        outputs, tables or error stay with its ticket."""
        if self._c.stats()["backend"] != "cpu":
            return
        for t in self._c.inflight:
            if not t.device:
                try:
                    self._c.wait(t)
                except Error:
                    pass  # raised again by wait(t)

    @_held
    def wait(self, ticket: Ticket, timeout: Optional[float] = None, *,
             tables: bool = True) -> Dict[str, Any]:
        """Waits for a submitted frame; returns its outputs by name: image arrays (those
        written) and, unless tables=False, tables as structured arrays. With a timeout
        in seconds (any number >= 0; 0 polls), NotReadyError (a TimeoutError) when the
        frame is still in flight then. A ticket is waited for on the pipeline that
        submitted it (ValueError otherwise); a complete one as often as you like, after
        close() too, raising the error its frame ended with (CancelledError...) if any.
        Python's signal handlers run during the wait: Ctrl-C cancels the frame and raises
        KeyboardInterrupt; the pipeline takes the next frame as usual."""
        if timeout is None:
            self._c.wait(ticket)
        else:
            if isinstance(timeout, (str, bytes)):  # float() would parse "5"
                raise TypeError(f"timeout must be None or a number of seconds, not "
                                f"{type(timeout).__name__}")
            t = float(timeout)
            if not t >= 0:  # NaN too
                raise ValueError(f"timeout must be None or a number of seconds >= 0, "
                                 f"not {timeout!r}")
            self._c.wait(ticket, t * 1000.0)  # the extension rounds up and clamps
        result: Dict[str, Any] = {}
        arrays = ticket.outputs
        got = ticket.tables if tables else None
        for k, name in enumerate(self._names):
            if self._kinds[k] != "table":
                if k < len(arrays) and arrays[k] is not None:
                    result[name] = arrays[k]
            elif got and name in got:
                result[name] = _table(*got[name])
        return result

    def poll(self, ticket: Ticket) -> bool:
        """True when the frame is complete (wait would not block). A ticket of another
        pipeline is a ValueError."""
        try:
            self._c.wait(ticket, 0)
        except _NotReady:
            return False
        except Error:
            if ticket.done:  # complete, with an error that wait() raises at once
                return True
            raise
        return True

    @_held
    def run(self, inputs: Any, outputs: Any = None, *, stream: Any = None,
            tables: bool = True) -> Dict[str, Any]:
        """Runs one frame and returns its outputs by name (submit, then wait: Ctrl-C
        cancels the frame and raises KeyboardInterrupt)."""
        return self.wait(self.submit(inputs, outputs, stream=stream), tables=tables)

    __call__ = run

    def cancel(self) -> None:
        """Asks the frames submitted so far to stop: a CPU frame stops at its next band or
        launch unit and its wait() raises CancelledError (a RuntimeError); its image
        outputs are then incomplete and its tables not made. Any thread may call it at any
        time, even while another thread waits on the pipeline; frames submitted later run
        as usual. GPU work already launched runs to its end. (Ctrl-C in wait() or run()
        does this, then raises KeyboardInterrupt.)"""
        self._c.cancel()

    def close(self) -> None:
        """Waits for frames in flight and frees the pipeline (also done when collected).
        Calls on a closed pipeline raise ClosedError (a RuntimeError)."""
        self._c.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
