"""Type stubs of the native module (python/src/lib.rs). Users call the
wrappers in ``mxbi`` and ``mxbi.bi``, which accept any array-like and check
every argument (``mxbi._args``). The classes users hold (Order, Tree,
Revealed) check their own: a wrong value or type raises MxbiError.
What a result holds is a property; methods take arguments or render."""

from typing import List, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = [
    "__version__", "MxbiError", "formats", "value_table", "cast", "decode", "quantize", "dequantize", "Order", "Tree",
    "presets", "gemm", "trace", "check", "RawReport", "edge_ms", "reveal", "diverge", "accuracy",
    "Revealed", "AccuracyReport", "fuzz", "check_case", "FuzzOutcome",
]

class MxbiError(ValueError):
    """Bad input or a run that cannot happen: one line naming the argument
    (the CLI's message where it has one). Its name is ``mxbi.MxbiError``."""

def formats() -> List[Tuple[str, int, float, int, bool, bool]]: ...
def value_table(format: str) -> Tuple[npt.NDArray[np.uint16], npt.NDArray[np.float64]]: ...
def cast(
    x: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    to: str,
    preset: Optional[str] = None,
    round: Optional[str] = None,
    overflow: Optional[str] = None,
    nan: Optional[str] = None,
    seed: Optional[int] = None,
    sr_bits: Optional[int] = None,
) -> Union[npt.NDArray[np.uint8], npt.NDArray[np.uint16]]: ...
def decode(
    codes: Union[npt.NDArray[np.uint8], npt.NDArray[np.uint16]], format: str
) -> npt.NDArray[np.float32]: ...
def quantize(
    x: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    format: str,
    preset: Optional[str] = None,
    scale_mode: Optional[str] = None,
    round: Optional[str] = None,
    seed: Optional[int] = None,
    flush_subnormals: bool = False,
    no_int8_neg2: bool = False,
    block: int = 32,
    axis: int = -1,
    pad: bool = False,
    scale_layout: str = "plain",
    stats: bool = False,
) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], Optional[str]]: ...
def dequantize(
    codes: npt.NDArray[np.uint8],
    scales: npt.NDArray[np.uint8],
    format: str,
    block: int = 32,
    axis: int = -1,
    pad: bool = False,
    scale_layout: str = "plain",
    dtype: str = "f32",
) -> Tuple[Union[npt.NDArray[np.float32], npt.NDArray[np.float64]], int]: ...

@final
class Order:
    """An accumulation order (docs/ORDERS.md); ``str()`` is its canonical spelling."""

    def __new__(cls, spec: str) -> Order: ...  # spec not a str: MxbiError
    @property
    def preset(self) -> Optional[str]: ...
    @property
    def input(self) -> str: ...
    def tree(self, k: int) -> Tree: ...  # k: an integer >= 0 within the order's limit
    def diff(self, other: Union[Order, str], k: int) -> Optional[str]: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Tree:
    """A compiled reduction tree; ``str()`` is the compressed view of ``mxbi order --k``."""

    @property
    def root(self) -> int: ...
    @property
    def k(self) -> int: ...
    def __len__(self) -> int: ...
    def listing(self) -> str: ...
    def describe(self, node: int) -> str: ...

def presets() -> List[Tuple[str, str]]: ...

_Operand = Union[npt.NDArray[np.float32], npt.NDArray[np.float64], npt.NDArray[np.uint8]]

def gemm(
    a: _Operand,
    b: _Operand,
    order: str,
    b_layout: str = "kn",
    rows: Optional[Sequence[int]] = None,
    generic: bool = False,
    format: Optional[str] = None,
    a_scales: Optional[npt.NDArray[np.uint8]] = None,
    b_scales: Optional[npt.NDArray[np.uint8]] = None,
) -> npt.NDArray[np.float32]: ...
def trace(
    a: _Operand,
    b: _Operand,
    order: str,
    row: int,
    col: int,
    b_layout: str = "kn",
    format: Optional[str] = None,
    a_scales: Optional[npt.NDArray[np.uint8]] = None,
    b_scales: Optional[npt.NDArray[np.uint8]] = None,
) -> List[Tuple[int, str, float, str]]: ...

@final
class RawReport:
    def to_json(self) -> str: ...
    def text(self) -> str: ...
    def markdown(self) -> str: ...
    def svg(self) -> str: ...
    def junit(self, strict: bool = False) -> str: ...
    def exit_code(self, strict: bool = False) -> int: ...
    def summary_line(self) -> str: ...
    def explanation_lines(self) -> List[List[str]]: ...

def check(
    subject: object,
    families: List[str],
    k: int,
    n: int,
    ms: Optional[List[int]] = None,
    rows: Optional[List[str]] = None,
    input: Optional[str] = None,
    seed: int = 1,
    repeats: int = 3,
    vs: object = None,
    name: Optional[str] = None,
    vs_name: Optional[str] = None,
    timeout: Optional[float] = None,
    witness: str = "auto",
    explain: bool = True,
) -> RawReport: ...

@final
class Revealed:
    """What :func:`reveal` recovered; ``str()`` is the explainer's text."""

    @property
    def order(self) -> Optional[str]: ...
    @property
    def equivalent(self) -> List[str]: ...
    @property
    def same_parts(self) -> List[str]: ...  # the named order's spellings with split parts starting elsewhere, same tree
    @property
    def sibling_pairs(self) -> int: ...  # answers that prove the tree's wide nodes (docs/EXPLAIN.md)
    @property
    def launches(self) -> int: ...
    @property
    def grid_launches(self) -> int: ...
    @property
    def timings(self) -> List[Tuple[str, float]]: ...
    @property
    def probes(self) -> int: ...
    @property
    def disagreements(self) -> int: ...
    @property
    def shape(self) -> str: ...  # the recovered tree, one node a line
    def to_json(self) -> str: ...

def reveal(
    subject: object,
    m: int,
    k: int,
    n: int,
    input: Optional[str] = None,
    seed: int = 7,
    verify_rows: int = 4,
    name: Optional[str] = None,
) -> Revealed: ...
def family(k: int, input: Optional[str] = None) -> List[str]: ...  # the explainer's family for K terms
def diverge(
    left: str,
    right: str,
    k: int,
    mx: bool = False,
    m_left: Optional[int] = None,
    m_right: Optional[int] = None,
) -> Tuple[str, List[str]]: ...

@final
class AccuracyReport:
    @property
    def passed(self) -> bool: ...
    def text(self) -> str: ...
    def to_json(self) -> str: ...

def accuracy(
    actual: npt.NDArray[np.float64],
    dtype: str,
    standard: str = "atk",
    golden: Optional[npt.NDArray[np.float64]] = None,
    benchmark: Optional[npt.NDArray[np.float64]] = None,
    a: Optional[_Operand] = None,
    b: Optional[_Operand] = None,
    b_layout: str = "kn",
    format: Optional[str] = None,
    a_scales: Optional[npt.NDArray[np.uint8]] = None,
    b_scales: Optional[npt.NDArray[np.uint8]] = None,
    subject: object = None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
) -> AccuracyReport: ...
def edge_ms(boundaries: Sequence[int]) -> List[int]: ...

@final
class FuzzOutcome:
    """What :func:`fuzz` found: ``fuzz.json``, ``minimal.json`` and the minimal case's setting."""

    def summary_json(self) -> str: ...
    def minimal_json(self) -> Optional[str]: ...
    def setting_json(self) -> Optional[str]: ...

def fuzz(
    subject: object,
    families: List[str] = ...,
    classes: List[str] = ...,
    budget: float = 60.0,
    max_cases: Optional[int] = None,
    seed: int = 1,
    out: Optional[str] = None,
    corpus: Optional[str] = None,
    input: Optional[str] = None,
    max_m: int = 513,
    max_k: int = 4096,
    max_n: int = 64,
    max_shrink_runs: int = 400,
    k_boundaries: List[int] = ...,
    name: Optional[str] = None,
    timeout: Optional[float] = None,
    confirm: int = 3,
    others: List[str] = ...,
) -> FuzzOutcome: ...
def check_case(
    case: str,
    subject: object = None,
    name: Optional[str] = None,
    timeout: Optional[float] = None,
    allow_exec: bool = False,
    explain: bool = True,
) -> RawReport: ...
