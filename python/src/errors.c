/* errors.c: the exceptions of the pipefuse package. One class per status of the C API
 * (PF_STATUS_MAP: ParseError for PF_PARSE, ...), each a subclass of pipefuse.Error and of
 * the built-in exception a Python program already catches for such a failure, carrying
 * .status and .status_name; and ClosedError, for a call on a closed pipeline. */
#include "binding.h"

#include <string.h>

static PyObject *Error;                           /* pipefuse.Error */
PyObject *pf_py_closed_error;                     /* pipefuse.ClosedError */
static PyObject *status_errors[PF_STATUS_COUNT_]; /* one subclass per status */

/* The built-in exception a status' class also is: bad values are ValueErrors, a file that
   cannot be read an OSError, a timeout a TimeoutError, memory a MemoryError, what fails
   while running a RuntimeError. */
static PyObject *builtin_base(int s)
{
    switch (s) {
    case PF_INVALID_ARGUMENT:
    case PF_PARSE:
    case PF_PIPELINE:
    case PF_PARAM:
    case PF_IMAGE:
    case PF_TOO_LARGE:
    case PF_SHAPE:
        return PyExc_ValueError;
    case PF_IO:
        return PyExc_OSError;
    case PF_NO_MEMORY:
        return PyExc_MemoryError;
    case PF_NOT_READY:
        return PyExc_TimeoutError;
    case PF_UNSUPPORTED:
        return PyExc_NotImplementedError;
    default: /* plugin, not planned, stage, no device, CUDA, internal, busy, cancelled */
        return PyExc_RuntimeError;
    }
}

/* "INVALID_ARGUMENT" -> "InvalidArgumentError" */
static void class_name(const char *status, char *buf, size_t size)
{
    size_t n = 0;
    int upper = 1;
    for (const char *s = status; *s && n + 6 < size; s++) {
        if (*s == '_') {
            upper = 1;
            continue;
        }
        buf[n++] = upper ? *s : (char)(*s - 'A' + 'a');
        upper = 0;
    }
    memcpy(buf + n, "Error", 6);
}

PyObject *pf_py_raise_status(int status, const char *msg)
{
    PyObject *cls = status > 0 && status < PF_STATUS_COUNT_ ? status_errors[status] : Error;
    const char *text = msg && *msg ? msg : pf_status_str(status);
    /* Messages name files: a path need not be UTF-8. */
    PyObject *str = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    PyObject *exc = str ? PyObject_CallOneArg(cls, str) : NULL;
    Py_XDECREF(str);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(status);
    PyObject *name = PyUnicode_FromString(pf_status_name(status));
    if (code && name && PyObject_SetAttrString(exc, "status", code) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

int pf_py_errors_init(PyObject *m)
{
    PyObject *edict = Py_BuildValue("{s:O,s:O}", "status", Py_None, "status_name", Py_None);
    Error = edict ? PyErr_NewExceptionWithDoc(
                        "pipefuse.Error",
                        "A pipefuse call failed: .status (int), .status_name ('PF_PARSE') and "
                        "the message the engine gave.",
                        NULL, edict)
                  : NULL;
    Py_XDECREF(edict);
    if (!Error || PyModule_AddObjectRef(m, "Error", Error) < 0)
        return -1;
    PyObject *cbases = PyTuple_Pack(2, Error, PyExc_RuntimeError);
    pf_py_closed_error =
        cbases ? PyErr_NewExceptionWithDoc(
                     "pipefuse.ClosedError",
                     "The pipeline is closed (a RuntimeError, as before there was this class).",
                     cbases, NULL)
               : NULL;
    Py_XDECREF(cbases);
    if (!pf_py_closed_error || PyModule_AddObjectRef(m, "ClosedError", pf_py_closed_error) < 0)
        return -1;
    PyObject *statuses = PyDict_New();
    if (!statuses || PyModule_AddObject(m, "STATUS", statuses) < 0) {
        Py_XDECREF(statuses);
        return -1;
    }
    for (int s = 1; s < PF_STATUS_COUNT_; s++) {
        char name[64], qual[80];
        const char *id = pf_status_name(s); /* "PF_PARSE" */
        class_name(id && strncmp(id, "PF_", 3) == 0 ? id + 3 : "UNKNOWN", name, sizeof name);
        snprintf(qual, sizeof qual, "pipefuse.%s", name);
        PyObject *dict = Py_BuildValue("{s:i,s:s}", "status", s, "status_name", pf_status_name(s));
        /* Each class is also the built-in exception a Python program already catches for
           such a failure (docs/python.md, Errors). */
        PyObject *also = builtin_base(s);
        PyObject *bases = also ? PyTuple_Pack(2, Error, also) : (Py_INCREF(Error), Error);
        status_errors[s] =
            dict && bases ? PyErr_NewExceptionWithDoc(qual, pf_status_str(s), bases, dict) : NULL;
        Py_XDECREF(dict);
        Py_XDECREF(bases);
        PyObject *code = PyLong_FromLong(s);
        if (!status_errors[s] || !code || PyModule_AddObjectRef(m, name, status_errors[s]) < 0 ||
            PyDict_SetItemString(statuses, pf_status_name(s), code) < 0) {
            Py_XDECREF(code);
            return -1;
        }
        Py_DECREF(code);
    }
    return 0;
}
