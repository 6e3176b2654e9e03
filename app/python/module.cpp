// The `dfmp2` Python module (README "Python module"): the linear-algebra layer on every backend with NumPy arrays
// in and out, the device models' modelled time per call, the explicit host fallback, random and quasi-random
// numbers, and the DF-MP2 driver (dfmp2.run). Built by the project's CMake (DFMP2_PYTHON) into build/python/.
//
// Arrays: float64 or float32, 2-D (1-D for vectors), any memory layout (copied to the column-major storage the
// layer uses); all operands of a call of one dtype. A wrong dtype is a TypeError and a wrong shape a ValueError,
// each naming the argument; the layer's own errors map to Python exceptions of their class (dfmp2.InputError,
// UnsupportedError, NumericalError, ResourceError; all derive from dfmp2.Error), never a crash.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>

#include <bit>
#include <filesystem>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "app/input.hpp"
#include "app/prepare.hpp"
#include "app/python/property_arrays.hpp"
#include "app/qcschema.hpp"
#include "app/results.hpp"
#include "app/run.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "linalg/inverse_sqrt.hpp"
#include "linalg/kernels.hpp"
#include "linalg/quasi_random.hpp"
#include "linalg/random.hpp"
#include "linalg/sparse.hpp"

namespace py = pybind11;
using namespace dfmp2;
using linalg::Index;

namespace {

// ---- arrays in and out

enum class Dt { f64, f32 };

// The element type by what it is, not by which object describes it: an array that went through pickle (as
// multiprocessing and concurrent.futures pass arrays) has a float64 dtype equal to NumPy's own but not the same object.
Dt dtype_of_array(const py::array& a, const char* name) {
  const py::dtype d = a.dtype();
  const char order = d.byteorder();
  const bool native = order == '=' || order == '|' || order == (std::endian::native == std::endian::little ? '<' : '>');
  if (d.kind() == 'f' && native && d.itemsize() == 8) return Dt::f64;
  if (d.kind() == 'f' && native && d.itemsize() == 4) return Dt::f32;
  throw py::type_error(fmt::format("argument '{}': expected a float64 or float32 array{}, got dtype {}", name,
                                   d.kind() == 'f' && !native ? " in this machine's byte order (a.astype(numpy.float64) "
                                                                "converts it)"
                                                              : "",
                                   std::string(py::str(static_cast<const py::object&>(d)))));
}

std::string type_name(const py::handle& o) { return py::str(o.get_type().attr("__name__")); }

py::array as_array(const py::object& o, const char* name) {
  if (!py::isinstance<py::array>(o)) {
    throw py::type_error(fmt::format("argument '{}': expected a NumPy array, got {}", name,
                                     std::string(py::str(o.get_type().attr("__name__")))));
  }
  return o.cast<py::array>();
}

template <class T>
linalg::MatrixT<T> to_matrix(const py::array& a, const char* name) {
  if (a.ndim() != 2) throw py::value_error(fmt::format("argument '{}': expected a 2-D array, got {}-D", name, a.ndim()));
  const auto f = py::array_t<T, py::array::f_style | py::array::forcecast>::ensure(a);
  linalg::MatrixT<T> m(static_cast<Index>(a.shape(0)), static_cast<Index>(a.shape(1)));
  std::copy_n(f.data(), m.size(), m.data());
  return m;
}

template <class T>
py::array to_numpy(const linalg::MatrixT<T>& m) {
  py::array_t<T, py::array::f_style> out({m.rows(), m.cols()});
  std::copy_n(m.data(), m.size(), out.mutable_data());
  return out;
}

template <class T>
py::array to_numpy(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

void same_dtype(Dt a, Dt b, const char* name) {
  if (a != b) {
    throw py::type_error(fmt::format("argument '{}': its dtype differs from 'a' (every operand of a call has one dtype)",
                                     name));
  }
}

linalg::Trans trans(bool t) { return t ? linalg::Trans::yes : linalg::Trans::no; }

// f(double{}) or f(float{}), as the operands' dtype says.
template <class F>
auto dispatch(Dt dt, F&& f) {
  return dt == Dt::f64 ? f(double{}) : f(float{});
}

// ---- sparse matrices

struct PySparse {
  std::string format;  // "csr" or "bsr"
  Dt dt;
  linalg::CsrMatrix<double> csr64;
  linalg::CsrMatrix<float> csr32;
  linalg::BsrMatrix<double> bsr64;
  linalg::BsrMatrix<float> bsr32;
  Index rows() const {
    return format == "csr" ? (dt == Dt::f64 ? csr64.rows : csr32.rows) : (dt == Dt::f64 ? bsr64.rows : bsr32.rows);
  }
  Index cols() const {
    return format == "csr" ? (dt == Dt::f64 ? csr64.cols : csr32.cols) : (dt == Dt::f64 ? bsr64.cols : bsr32.cols);
  }
};

PySparse sparse_from_dense(const py::object& obj, const std::string& format, Index block, double threshold) {
  const py::array a = as_array(obj, "a");
  PySparse s;
  s.format = format;
  s.dt = dtype_of_array(a, "a");
  if (block < 1) throw py::value_error(fmt::format("argument 'block': expected a block size >= 1, got {}", block));
  if (s.dt == Dt::f64) {
    const auto m = to_matrix<double>(a, "a");
    if (format == "csr") s.csr64 = linalg::csr_from_dense(m, threshold);
    else s.bsr64 = linalg::bsr_from_dense(m, block, block, threshold);
  } else {
    const auto m = to_matrix<float>(a, "a");
    if (format == "csr") s.csr32 = linalg::csr_from_dense(m, threshold);
    else s.bsr32 = linalg::bsr_from_dense(m, block, block, threshold);
  }
  return s;
}

// ---- a backend with its kernel log

class PyBackend {
 public:
  PyBackend(const std::string& name, std::optional<int> threads, bool host_fallback, const py::dict& device,
            std::optional<std::string> matmul_mode)
      : name_(name) {
    devices::DeviceOptions options;
    options.compile_cache = "";  // no persistent cache unless asked: a fresh process compiles cold
    for (const auto& [k, v] : device) {
      if (!py::isinstance<py::str>(k)) {
        throw py::type_error(fmt::format("argument 'device': keys are parameter names (str), got {}", type_name(k)));
      }
      const std::string key = k.cast<std::string>();
      if (key == "compile_cache") {
        if (!py::isinstance<py::str>(v) && !v.is_none()) {
          throw py::type_error(fmt::format("argument 'device': 'compile_cache' is a folder (str) or None, got {}",
                                           type_name(v)));
        }
        options.compile_cache = v.is_none() ? "" : v.cast<std::string>();
      } else {
        // A number: int or float, not a bool (True is an int in Python, and no parameter is a switch).
        if (py::isinstance<py::bool_>(v) || !(py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))) {
          throw py::type_error(fmt::format("argument 'device': parameter '{}' is a number, got {}", key, type_name(v)));
        }
        options.overrides[name][key] = v.cast<double>();
      }
    }
    if (threads && *threads < 1) {
      throw py::value_error(fmt::format("argument 'threads': expected a number of threads >= 1, got {}", *threads));
    }
    backend_ = devices::make_backend(name, options);
    if (threads) backend_->set_threads(*threads);
    kernels_ = std::make_unique<linalg::Kernels>(*backend_, log_);
    if (host_fallback) {
      fallback_ = devices::make_backend(devices::default_backend());
      if (threads) fallback_->set_threads(*threads);
      kernels_->set_fallback(fallback_.get());
    }
    if (matmul_mode) {
      for (const auto& [mode, mode_name] : linalg::matmul_mode_names()) {
        if (mode_name == *matmul_mode) {
          kernels_->set_matmul_mode(mode);
          return;
        }
      }
      throw py::value_error(fmt::format("argument 'matmul_mode': expected fp32, bf16 or bf16x3, got '{}'", *matmul_mode));
    }
  }

  std::string name() const { return name_; }
  std::string details() const { return backend_->details(); }
  std::vector<std::string> calls_so_far() const {
    std::vector<std::string> out;
    for (const auto& r : log_.records()) out.push_back(r.kernel);
    return out;
  }

  // What the last call did: kernel, the backend that ran it, dtype, seconds, flops, bytes, whether it ran on the
  // host fallback, and for a device model its modelled time with the breakdown.
  py::dict last_call() const {
    if (last_.empty()) return py::dict();
    return last_;
  }

  py::array gemm(const py::object& a_obj, const py::object& b_obj, double alpha, double beta,
                 const py::object& c_obj, bool trans_a, bool trans_b) {
    const py::array a = as_array(a_obj, "a"), b = as_array(b_obj, "b");
    const Dt dt = dtype_of_array(a, "a");
    same_dtype(dt, dtype_of_array(b, "b"), "b");
    return dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      const auto am = to_matrix<T>(a, "a"), bm = to_matrix<T>(b, "b");
      const Index m = trans_a ? am.cols() : am.rows(), k = trans_a ? am.rows() : am.cols();
      const Index kb = trans_b ? bm.cols() : bm.rows(), n = trans_b ? bm.rows() : bm.cols();
      if (k != kb) {
        throw py::value_error(fmt::format("argument 'b': op(a) is {} x {}, so op(b) needs {} rows, has {}", m, k, k, kb));
      }
      linalg::MatrixT<T> c = linalg::MatrixT<T>::Zero(m, n);
      if (!c_obj.is_none()) {
        const py::array ca = as_array(c_obj, "c");
        same_dtype(dt, dtype_of_array(ca, "c"), "c");
        c = to_matrix<T>(ca, "c");
        if (c.rows() != m || c.cols() != n)
          throw py::value_error(fmt::format("argument 'c': expected {} x {}, got {} x {}", m, n, c.rows(), c.cols()));
      }
      call([&] {
        kernels_->gemm<T>(kStep, trans(trans_a), trans(trans_b), T(alpha), linalg::view(am), linalg::view(bm), T(beta),
                          linalg::view(c));
      });
      return to_numpy(c);
    });
  }

  // The symmetric alpha op(a) op(a)^T, both triangles filled.
  py::array syrk(const py::object& a_obj, double alpha, bool trans_a) {
    const py::array a = as_array(a_obj, "a");
    return dispatch(dtype_of_array(a, "a"), [&](auto tag) {
      using T = decltype(tag);
      const auto am = to_matrix<T>(a, "a");
      const Index n = trans_a ? am.cols() : am.rows();
      linalg::MatrixT<T> c = linalg::MatrixT<T>::Zero(n, n);
      call([&] {
        kernels_->syrk<T>(kStep, linalg::Uplo::lower, trans(trans_a), T(alpha), linalg::view(am), T(0),
                          linalg::view(c));
      });
      c.template triangularView<Eigen::StrictlyUpper>() = c.transpose();
      return to_numpy(c);
    });
  }

  // X with op(A) X = alpha B (side left) or X op(A) = alpha B (right), A triangular (only its `lower` or upper
  // triangle is read).
  py::array trsm(const py::object& a_obj, const py::object& b_obj, const std::string& side, bool lower, bool trans_a,
                 bool unit_diagonal, double alpha) {
    const py::array a = as_array(a_obj, "a"), b = as_array(b_obj, "b");
    const Dt dt = dtype_of_array(a, "a");
    same_dtype(dt, dtype_of_array(b, "b"), "b");
    if (side != "left" && side != "right")
      throw py::value_error(fmt::format("argument 'side': expected 'left' or 'right', got '{}'", side));
    return dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      const auto am = to_matrix<T>(a, "a");
      auto bm = to_matrix<T>(b, "b");
      if (am.rows() != am.cols()) throw py::value_error(fmt::format("argument 'a': expected a square matrix, got {} x {}", am.rows(), am.cols()));
      const Index need = side == "left" ? bm.rows() : bm.cols();
      if (need != am.rows())
        throw py::value_error(fmt::format("argument 'b': a is {} x {}, so b needs {} {}, has {}", am.rows(), am.cols(),
                                          am.rows(), side == "left" ? "rows" : "columns", need));
      call([&] {
        kernels_->trsm<T>(kStep, side == "left" ? linalg::Side::left : linalg::Side::right,
                          lower ? linalg::Uplo::lower : linalg::Uplo::upper, trans(trans_a),
                          unit_diagonal ? linalg::Diag::unit : linalg::Diag::non_unit, T(alpha), linalg::view(am),
                          linalg::view(bm));
      });
      return to_numpy(bm);
    });
  }

  // L with a = L L^T (lower; the upper triangle zero).
  py::array cholesky(const py::object& a_obj) {
    const py::array a = as_array(a_obj, "a");
    return dispatch(dtype_of_array(a, "a"), [&](auto tag) {
      using T = decltype(tag);
      auto am = square<T>(a, "a");
      call([&] { kernels_->cholesky<T>(kStep, linalg::Uplo::lower, linalg::view(am)); });
      am.template triangularView<Eigen::StrictlyUpper>().setZero();
      return to_numpy(am);
    });
  }

  // (eigenvalues ascending, eigenvectors as columns).
  py::tuple eigh(const py::object& a_obj) {
    const py::array a = as_array(a_obj, "a");
    return dispatch(dtype_of_array(a, "a"), [&](auto tag) {
      using T = decltype(tag);
      auto am = square<T>(a, "a");
      std::vector<T> w(static_cast<std::size_t>(am.rows()));
      call([&] { kernels_->eigh<T>(kStep, linalg::view(am), w.data()); });
      return py::make_tuple(to_numpy(w), to_numpy(am));
    });
  }

  // (a^-1/2, report): by eigh (eigenvalues below threshold x the largest dropped) or by Newton-Schulz.
  py::tuple inverse_sqrt(const py::object& a_obj, const std::string& method, double threshold, double tolerance,
                         int max_iterations) {
    const py::array a = as_array(a_obj, "a");
    if (method != "eigh" && method != "newton-schulz")
      throw py::value_error(fmt::format("argument 'method': expected 'eigh' or 'newton-schulz', got '{}'", method));
    // The same rules as the input keys metric.threshold, metric.tolerance and metric.max_iterations.
    if (const std::string why = linalg::eigh_threshold_problem(threshold); !why.empty())
      throw py::value_error("argument 'threshold': " + why);
    if (const std::string why = linalg::newton_schulz_problem({tolerance, max_iterations}); !why.empty()) {
      const std::size_t colon = why.find(':');  // "tolerance: expected ..."
      throw py::value_error(fmt::format("argument '{}'{}", why.substr(0, colon), why.substr(colon)));
    }
    return dispatch(dtype_of_array(a, "a"), [&](auto tag) {
      using T = decltype(tag);
      auto am = square<T>(a, "a");
      linalg::InverseSqrtReport r;
      call([&] {
        if (method == "eigh") r = linalg::inverse_sqrt_eigh<T>(*kernels_, kStep, linalg::view(am), threshold);
        else r = linalg::inverse_sqrt_newton_schulz<T>(*kernels_, kStep, linalg::view(am), {tolerance, max_iterations});
      });
      py::dict report;
      report["method"] = method;
      report["dropped"] = r.dropped;
      report["smallest_kept"] = r.smallest_kept;
      report["largest"] = r.largest;
      report["iterations"] = r.iterations;
      report["residual"] = r.residual;
      return py::make_tuple(to_numpy(am), report);
    });
  }

  // alpha op(s) b, s a CSR or BSR matrix (dfmp2.csr_from_dense, dfmp2.bsr_from_dense).
  py::array spmm(const PySparse& s, const py::object& b_obj, double alpha, bool trans_s) {
    const py::array b = as_array(b_obj, "b");
    same_dtype(s.dt, dtype_of_array(b, "b"), "b");
    return dispatch(s.dt, [&](auto tag) {
      using T = decltype(tag);
      const auto bm = to_matrix<T>(b, "b");
      const Index m = trans_s ? s.cols() : s.rows(), k = trans_s ? s.rows() : s.cols();
      if (bm.rows() != k) throw py::value_error(fmt::format("argument 'b': op(s) is {} x {}, so b needs {} rows, has {}", m, k, k, bm.rows()));
      linalg::MatrixT<T> c = linalg::MatrixT<T>::Zero(m, bm.cols());
      call([&] {
        if constexpr (std::is_same_v<T, double>) {
          if (s.format == "csr") kernels_->spmm<T>(kStep, trans(trans_s), T(alpha), s.csr64, linalg::view(bm), T(0), linalg::view(c));
          else kernels_->spmm<T>(kStep, trans(trans_s), T(alpha), s.bsr64, linalg::view(bm), T(0), linalg::view(c));
        } else {
          if (s.format == "csr") kernels_->spmm<T>(kStep, trans(trans_s), T(alpha), s.csr32, linalg::view(bm), T(0), linalg::view(c));
          else kernels_->spmm<T>(kStep, trans(trans_s), T(alpha), s.bsr32, linalg::view(bm), T(0), linalg::view(c));
        }
      });
      return to_numpy(c);
    });
  }

 private:
  static constexpr const char* kStep = "python";

  template <class T>
  linalg::MatrixT<T> square(const py::array& a, const char* name) {
    auto m = to_matrix<T>(a, name);
    if (m.rows() != m.cols())
      throw py::value_error(fmt::format("argument '{}': expected a square matrix, got {} x {}", name, m.rows(), m.cols()));
    return m;
  }

  // Runs one call of the layer and keeps what the kernel log says of it (a composite, such as an inverse square
  // root, sums its kernels).
  template <class F>
  void call(F&& f) {
    log_.clear();
    f();
    py::dict d;
    double seconds = 0, flops = 0, bytes = 0;
    bool fallback = false, modelled = false;
    linalg::ModelledTime model;
    std::vector<std::string> kernels;
    std::string ran_on, dtype;
    for (const auto& r : log_.records()) {
      seconds += r.seconds;
      flops += r.flops;
      bytes += r.bytes;
      fallback = fallback || r.fallback;
      if (r.modelled) {
        modelled = true;
        model += r.model;
      }
      kernels.push_back(r.kernel);
      ran_on = r.backend;
      dtype = r.dtype;
    }
    d["kernels"] = kernels;
    d["backend"] = ran_on;
    d["dtype"] = dtype;
    d["seconds"] = seconds;
    d["flops"] = flops;
    d["bytes"] = bytes;
    d["fallback"] = fallback;
    if (modelled) {
      py::dict m;
      m["seconds"] = model.total;
      m["dispatch"] = model.dispatch;
      m["transfer"] = model.transfer;
      m["dma"] = model.dma;
      m["compute"] = model.compute;
      m["host"] = model.host;
      m["compile"] = model.compile;
      m["launches"] = model.launches;
      m["compiles"] = model.compiles;
      m["cache_loads"] = model.cache_loads;
      m["device_flops"] = model.device_flops;
      d["modelled"] = m;
    } else {
      d["modelled"] = py::none();
    }
    last_ = d;
  }

  std::string name_;
  std::unique_ptr<linalg::Backend> backend_, fallback_;
  linalg::KernelLog log_;
  std::unique_ptr<linalg::Kernels> kernels_;
  py::dict last_;
};

// ---- random and quasi-random numbers

// n numbers of `bytes` each: more than the memory available is a ResourceError naming the argument, before the
// allocation (a bad_alloc or a length_error would say nothing of which argument).
void check_count(std::uint64_t n, double bytes, const char* name) {
  const double need = double(n) * bytes, have = app::available_memory_bytes();
  if (need > have) {
    throw ResourceError(fmt::format("argument '{}': {} numbers need {:.3g} GB, more than the {:.3g} GB available", name,
                                    n, need / 1e9, have / 1e9));
  }
}

py::array philox(std::uint64_t seed, std::uint64_t stream, std::uint64_t n, std::uint64_t offset,
                 const std::string& distribution, const std::string& dtype) {
  check_count(n, dtype == "float32" ? 4.0 : 8.0, "n");
  const linalg::PhiloxStream s(seed, stream);
  if (distribution != "uniform" && distribution != "normal")
    throw py::value_error(fmt::format("argument 'distribution': expected 'uniform' or 'normal', got '{}'", distribution));
  if (dtype == "float64") {
    std::vector<double> v(n);
    if (distribution == "uniform") s.parallel_uniform(v.data(), n, offset);
    else s.parallel_normal(v.data(), n, offset);
    return to_numpy(v);
  }
  if (dtype == "float32") {
    std::vector<float> v(n);
    if (distribution == "uniform") s.parallel_uniform(v.data(), n, offset);
    else s.parallel_normal(v.data(), n, offset);
    return to_numpy(v);
  }
  throw py::type_error(fmt::format("argument 'dtype': expected 'float64' or 'float32', got '{}'", dtype));
}

void check_dimensions(unsigned d, unsigned most, const char* what) {
  if (d < 1 || d > most)
    throw py::value_error(fmt::format("argument 'dimensions': {} needs 1 to {}, got {}", what, most, d));
}

// ---- the DF-MP2 driver

// A value of the input dict as JSON takes it: what Python users pass (NumPy integers, floats and booleans, paths
// such as pathlib.Path, tuples) as the number, boolean, string or list it stands for; anything else is an InputError
// naming its key.
py::object plain_value(const py::handle& value, const std::string& key) {
  const py::module_ numpy = py::module_::import("numpy"), os = py::module_::import("os");
  const auto name = [&] { return key.empty() ? std::string("the input") : fmt::format("key '{}'", key); };
  if (value.is_none() || py::isinstance<py::bool_>(value) || py::isinstance<py::str>(value) ||
      py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value)) {
    return py::reinterpret_borrow<py::object>(value);
  }
  if (py::isinstance(value, numpy.attr("bool_"))) return py::bool_(value.cast<bool>());
  const py::object builtins = py::module_::import("builtins");
  if (py::isinstance(value, numpy.attr("integer"))) return builtins.attr("int")(value);
  if (py::isinstance(value, numpy.attr("floating"))) return builtins.attr("float")(value);
  if (py::isinstance(value, os.attr("PathLike"))) {
    const py::object path = os.attr("fspath")(value);
    if (py::isinstance<py::str>(path)) return path;
  }
  if (py::isinstance<py::dict>(value)) {
    py::dict out;
    for (const auto& [k, v] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(k)) {
        throw InputError(fmt::format("input dict: {} has a key {} of type {}; keys are strings", name(),
                                     std::string(py::repr(k)), type_name(k)));
      }
      const std::string sub = k.cast<std::string>();
      out[k] = plain_value(v, key.empty() ? sub : key + "." + sub);
    }
    return std::move(out);
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    py::list out;
    std::size_t i = 0;
    for (const auto& item : value) out.append(plain_value(item, fmt::format("{}[{}]", key, i++)));
    return std::move(out);
  }
  throw InputError(fmt::format("input dict: {}: a {} is not an input value (expected a string, number, boolean, "
                               "path, list or mapping)", name(), type_name(value)));
}

// A dict is a dfmp2 input mapping (the YAML keys; paths relative to the current folder); a string or a path
// (os.PathLike) is an input file (YAML, or a QCSchema AtomicInput when it ends in .json). Returns the results file
// as a dict.
py::dict run(const py::object& input) {
  app::Input in;
  const py::object os_path_like = py::module_::import("os").attr("PathLike");
  if (py::isinstance<py::str>(input) || py::isinstance(input, os_path_like)) {
    const py::object path = py::module_::import("os").attr("fspath")(input);
    if (!py::isinstance<py::str>(path)) throw py::type_error("argument 'input': a path of bytes; give it as a string");
    in = app::read_input_file(path.cast<std::string>());
  } else if (py::isinstance<py::dict>(input)) {
    const std::string text = py::module_::import("json").attr("dumps")(plain_value(input, "")).cast<std::string>();
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("input dict: {}", e.what()));
    }
    if (!root.IsMap()) throw InputError("input dict: expected a mapping of dfmp2 input keys");
    in = app::input_from_mapping(root, app::YamlReader("<input dict>"));
  } else {
    throw py::type_error("argument 'input': expected a dict of input keys or the path of an input file");
  }
  // As the command line runs it (app/prepare.hpp): `output` checked before and written after, a QCSchema input's
  // errors named by its fields.
  const app::PreparedRun prepared = app::prepare_run(std::move(in));
  linalg::SerialComm alone;  // the module runs as one process
  const app::Calculation calc = app::run_prepared(prepared, alone);
  py::dict out = py::module_::import("json").attr("loads")(app::finish_run(prepared, calc).dump()).cast<py::dict>();
  if (calc.properties) out["arrays"] = app::property_arrays(calc);  // driver: properties
  return out;
}

}  // namespace

PYBIND11_MODULE(dfmp2, m) {
  // This shared object's own path (the installed module finds its basis library from it).
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&run), &self) != 0 && self.dli_fname != nullptr)
    app::set_program_location(self.dli_fname);
  m.doc() = "dfmp2: the linear-algebra layer, the Trainium device models and DF-MP2 (README 'Python module')";
  // Pure-Python submodules (dfmp2.ase) live in dfmp2_modules/ beside this shared object: a __path__ makes the
  // extension a package that `import dfmp2.ase` searches.
  if (self.dli_fname != nullptr) {
    const std::string here = std::filesystem::path(self.dli_fname).parent_path().string();
    py::list path;
    path.append(here + "/dfmp2_modules");
    m.attr("__path__") = path;
  }
  m.attr("__version__") = DFMP2_VERSION;

  // Exceptions of the program's classes (README "Errors and exit codes").
  // Every class is a dfmp2.Error; InputError and IntegralFileError are also ValueErrors (bad values given to a call),
  // OutputError an OSError (a file that cannot be written). One translator maps the program's classes (README
  // "Errors and exit codes") to these.
  auto make = [&](const char* name, std::initializer_list<PyObject*> bases) {
    py::tuple b(bases.size());
    std::size_t i = 0;
    for (PyObject* base : bases) b[i++] = py::reinterpret_borrow<py::object>(base);
    const std::string qualified = std::string("dfmp2.") + name;
    PyObject* type = PyErr_NewException(qualified.c_str(), b.ptr(), nullptr);
    if (type == nullptr) throw py::error_already_set();
    m.attr(name) = py::reinterpret_steal<py::object>(type);
    return type;
  };
  static PyObject* const error = make("Error", {PyExc_RuntimeError});
  static PyObject* const input_error = make("InputError", {error, PyExc_ValueError});
  static PyObject* const integral_file_error = make("IntegralFileError", {error, PyExc_ValueError});
  static PyObject* const unsupported = make("UnsupportedError", {error});
  static PyObject* const numerical = make("NumericalError", {error});
  static PyObject* const resource = make("ResourceError", {error});
  static PyObject* const output_error = make("OutputError", {error, PyExc_OSError});
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(input_error, e.what());
    } catch (const IntegralFileError& e) {
      PyErr_SetString(integral_file_error, e.what());
    } catch (const UnsupportedError& e) {
      PyErr_SetString(unsupported, e.what());
    } catch (const NumericalError& e) {
      PyErr_SetString(numerical, e.what());
    } catch (const ResourceError& e) {
      PyErr_SetString(resource, e.what());
    } catch (const OutputError& e) {
      PyErr_SetString(output_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    } catch (const std::logic_error& e) {  // a shape the layer's own checks refuse
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("backends", &devices::built_backends, "the backends this build can run on this machine");
  m.def("default_backend", &devices::default_backend, "the CPU backend chosen at run time (README 'Backends')");

  py::class_<PySparse>(m, "SparseMatrix")
      .def_property_readonly("format", [](const PySparse& s) { return s.format; })
      .def_property_readonly("shape", [](const PySparse& s) { return py::make_tuple(s.rows(), s.cols()); });
  m.def("csr_from_dense", [](const py::object& a, double threshold) { return sparse_from_dense(a, "csr", 1, threshold); },
        py::arg("a"), py::arg("threshold") = 0.0, "CSR of the elements of `a` with |x| > threshold");
  m.def("bsr_from_dense",
        [](const py::object& a, Index block, double threshold) { return sparse_from_dense(a, "bsr", block, threshold); },
        py::arg("a"), py::arg("block") = 32, py::arg("threshold") = 0.0,
        "BSR of `a` in block x block tiles, dropping tiles whose largest |x| is not above threshold");

  py::class_<PyBackend>(m, "Backend")
      .def(py::init<const std::string&, std::optional<int>, bool, const py::dict&, std::optional<std::string>>(),
           py::arg("name"), py::arg("threads") = py::none(), py::arg("host_fallback") = false,
           py::arg("device") = py::dict(), py::arg("matmul_mode") = py::none(),
           "a backend by name (dfmp2.backends()); host_fallback runs what it cannot on the host and says so per call; "
           "device: parameter overrides of a device model and compile_cache; matmul_mode: fp32, bf16 or bf16x3 for "
           "a device model's fp32 products")
      .def_property_readonly("name", &PyBackend::name)
      .def_property_readonly("details", &PyBackend::details)
      .def_property_readonly("last_call", &PyBackend::last_call,
                             "kernels, backend, dtype, seconds, flops, bytes, fallback, and modelled (device models: "
                             "seconds, dispatch, transfer, dma, compute, host, compile, launches, compiles, "
                             "cache_loads, device_flops; None on a CPU backend)")
      .def("gemm", &PyBackend::gemm, py::arg("a"), py::arg("b"), py::arg("alpha") = 1.0, py::arg("beta") = 0.0,
           py::arg("c") = py::none(), py::arg("trans_a") = false, py::arg("trans_b") = false)
      .def("syrk", &PyBackend::syrk, py::arg("a"), py::arg("alpha") = 1.0, py::arg("trans_a") = false)
      .def("trsm", &PyBackend::trsm, py::arg("a"), py::arg("b"), py::arg("side") = "left", py::arg("lower") = true,
           py::arg("trans_a") = false, py::arg("unit_diagonal") = false, py::arg("alpha") = 1.0)
      .def("cholesky", &PyBackend::cholesky, py::arg("a"))
      .def("eigh", &PyBackend::eigh, py::arg("a"))
      .def("inverse_sqrt", &PyBackend::inverse_sqrt, py::arg("a"), py::arg("method") = "eigh",
           py::arg("threshold") = linalg::kDefaultEighThreshold, py::arg("tolerance") = 1e-10,
           py::arg("max_iterations") = 100)
      .def("spmm", &PyBackend::spmm, py::arg("s"), py::arg("b"), py::arg("alpha") = 1.0, py::arg("trans_s") = false);

  m.def("philox", &philox, py::arg("seed"), py::arg("stream") = 0, py::arg("n") = 1, py::arg("offset") = 0,
        py::arg("distribution") = "uniform", py::arg("dtype") = "float64",
        "n numbers of the Philox4x32-10 stream (seed, stream) from element `offset`: uniform on [0, 1) or normal");
  m.def(
      "sobol",
      [](unsigned d, std::uint64_t n, std::uint64_t first) {
        check_dimensions(d, linalg::kSobolMaxDimension, "Sobol");
        check_count(n, 8.0 * d, "n");
        return to_numpy(linalg::SobolSequence(d).points(first, n));
      },
      py::arg("dimensions"), py::arg("n"), py::arg("first") = 0, "n Sobol points (one per row)");
  m.def(
      "halton",
      [](unsigned d, std::uint64_t n, std::uint64_t first) {
        check_dimensions(d, 1000, "Halton");
        check_count(n, 8.0 * d, "n");
        return to_numpy(linalg::HaltonSequence(d).points(first, n));
      },
      py::arg("dimensions"), py::arg("n"), py::arg("first") = 1, "n Halton points (one per row)");
  m.def(
      "latin_hypercube",
      [](std::size_t n, unsigned d, std::uint64_t seed, bool centered) {
        check_dimensions(d, 100000, "a Latin hypercube");
        check_count(n, 16.0 * d, "n");
        return to_numpy(linalg::latin_hypercube(n, d, seed, centered));
      },
      py::arg("n"), py::arg("dimensions"), py::arg("seed") = 0, py::arg("centered") = false,
      "an n-point Latin hypercube sample (one point per row)");

  m.def("run", &run, py::arg("input"),
        "runs a calculation: a dict of dfmp2 input keys or the path of an input file (YAML, or QCSchema .json); "
        "returns the results file as a dict");
}
