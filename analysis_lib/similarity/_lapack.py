"""A few LAPACK routines, called so that several Python threads can run them at once.

SciPy's Python wrappers of ``sytrd``, ``stedc``, ``potrf`` and ``trtri``
(:mod:`scipy.linalg.lapack`) hold Python's global interpreter lock while LAPACK runs, so
the decompositions that :meth:`~._backend.Backend.eighs` and
:meth:`~._backend.Backend.certified_inverse_choleskys` spread over threads would take turns
(measured at 768 x 768 on two one-thread workers: ``sytrd`` 30 ms each side by side against
33 ms one after another). Here the same routines of SciPy's LAPACK are called through the
function pointers that :mod:`scipy.linalg.cython_lapack` publishes for compiled code, with
:mod:`ctypes`, which releases the lock for the length of a foreign call.

Every function takes float64 NumPy matrices laid out column by column (Fortran order, or a
block of such an array), works in place where LAPACK does, and returns LAPACK's ``info``
(0 on success).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

#: how many arguments each routine takes (all passed by address, as Fortran does)
_ARITY = {"dpotrf": 5, "dtrtri": 6, "dsytrd": 10, "dstedc": 11, "dormqr": 13}


@cache
def _routine(name: str):
    from scipy.linalg import cython_lapack

    # item access gives fresh function objects: the shared ctypes.pythonapi ones keep
    # whatever argument types other code set on them
    get_name = ctypes.pythonapi["PyCapsule_GetName"]
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsule = cython_lapack.__pyx_capi__[name]
    address = get_pointer(capsule, get_name(capsule))
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * _ARITY[name])(address)


@cache
def available() -> bool:
    """Whether SciPy publishes the function pointers used here (every SciPy since 0.16
    does). Without them :mod:`._backend` falls back to NumPy's and SciPy's Python-level
    routines: the same results, with the side-by-side work taking turns."""
    try:
        for name in _ARITY:
            _routine(name)
    except (ImportError, AttributeError, KeyError, ValueError, TypeError):
        return False
    return True


class _Call:
    """The scalar arguments of one call, kept alive while LAPACK reads them by address."""

    def __init__(self):
        self.kept = []
        self.info = ctypes.c_int(0)

    def char(self, c: str) -> int:
        return self._keep(ctypes.c_char(c.encode()))

    def int(self, v: int) -> int:
        return self._keep(ctypes.c_int(v))

    def _keep(self, x) -> int:
        self.kept.append(x)
        return ctypes.addressof(x)

    @property
    def status(self) -> int:
        """Where LAPACK writes ``info``."""
        return ctypes.addressof(self.info)


def _matrix(a: np.ndarray) -> tuple[int, int]:
    """Address and leading dimension of a float64 matrix laid out column by column (a
    Fortran-ordered array, or a block of one)."""
    item = a.itemsize
    if (a.dtype != np.float64 or a.ndim != 2 or not a.flags.writeable
            or (a.shape[0] > 1 and a.strides[0] != item)
            or a.strides[1] % item or a.strides[1] < item * a.shape[0]):
        raise ValueError("LAPACK arrays must be writeable float64 matrices in column order "
                         "(Fortran order, or a block of such an array)")
    return a.ctypes.data, max(1, a.strides[1] // item, a.shape[0])


def potrf(a: np.ndarray, lower: bool = True) -> int:
    """Cholesky factor of the symmetric ``a`` (n x n) in its lower (or upper) triangle; the
    other triangle is left as it was."""
    call = _Call()
    n = a.shape[0]
    address, ld = _matrix(a)
    _routine("dpotrf")(call.char("L" if lower else "U"), call.int(n), address, call.int(ld),
                       call.status)
    return call.info.value


def trtri(a: np.ndarray, lower: bool = True) -> int:
    """Inverse of the triangular ``a`` in place (the other triangle is not read or
    written)."""
    call = _Call()
    n = a.shape[0]
    address, ld = _matrix(a)
    _routine("dtrtri")(call.char("L" if lower else "U"), call.char("N"), call.int(n),
                       address, call.int(ld), call.status)
    return call.info.value


def sytrd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Reduction of the symmetric ``a`` (lower triangle read) to tridiagonal form
    ``a = Q T Q'``: returns ``T``'s diagonal and off-diagonal, the reflectors' factors
    ``tau`` and ``info``; the reflectors are left below ``a``'s subdiagonal."""
    n = a.shape[0]
    address, ld = _matrix(a)
    diag, off, tau = np.empty(n), np.empty(max(n - 1, 1)), np.empty(max(n - 1, 1))
    work = np.empty(1)

    def run(lwork: int) -> int:
        call = _Call()
        _routine("dsytrd")(call.char("L"), call.int(n), address, call.int(ld),
                           diag.ctypes.data, off.ctypes.data, tau.ctypes.data,
                           work.ctypes.data, call.int(lwork), call.status)
        return call.info.value

    run(-1)  # workspace query
    work = np.empty(max(1, int(work[0])))
    return diag, off[:n - 1], tau[:n - 1], run(work.size)


def stedc(diag: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Every eigenpair of the symmetric tridiagonal matrix with this diagonal and
    off-diagonal (divide and conquer): ascending eigenvalues, eigenvectors (n x n, Fortran
    order), ``info``."""
    n = diag.shape[0]
    lam = np.array(diag, dtype=np.float64)
    e = np.zeros(max(n, 1))
    e[:n - 1] = off
    Z = np.empty((n, n), order="F")
    work, iwork = np.empty(1), np.empty(1, dtype=np.intc)

    def run(lwork: int, liwork: int) -> int:
        call = _Call()
        _routine("dstedc")(call.char("I"), call.int(n), lam.ctypes.data, e.ctypes.data,
                           Z.ctypes.data, call.int(max(1, n)), work.ctypes.data,
                           call.int(lwork), iwork.ctypes.data, call.int(liwork), call.status)
        return call.info.value

    run(-1, -1)  # workspace query
    work = np.empty(max(1, int(work[0])))
    iwork = np.empty(max(1, int(iwork[0])), dtype=np.intc)
    return lam, Z, run(work.size, iwork.size)


def ormqr(reflectors: np.ndarray, tau: np.ndarray, c: np.ndarray) -> int:
    """``c <- Q c`` in place, for ``Q`` the product of the QR-form Householder reflectors
    (``reflectors`` m x k, ``tau`` k) and ``c`` m x n."""
    m, n = c.shape
    k = tau.shape[0]
    if reflectors.shape != (m, k):
        raise ValueError(f"reflectors must be {m} x {k}, got {reflectors.shape}")
    (v, ldv), (address, ldc) = _matrix(reflectors), _matrix(c)
    work = np.empty(1)
    tau = np.ascontiguousarray(tau, dtype=np.float64)

    def run(lwork: int) -> int:
        call = _Call()
        _routine("dormqr")(call.char("L"), call.char("N"), call.int(m), call.int(n),
                           call.int(k), v, call.int(ldv), tau.ctypes.data, address,
                           call.int(ldc), work.ctypes.data, call.int(lwork), call.status)
        return call.info.value

    run(-1)  # workspace query
    work = np.empty(max(1, int(work[0])))
    return run(work.size)
