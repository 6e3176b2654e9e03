#pragma once
// One exception family for the whole program. Each type maps to one exit code in app/main.cpp, and each
// message is a single line naming the input at fault (file, key or dataset) and what was expected.
#include <stdexcept>
#include <string>
#include <utility>

namespace dfmp2 {

// An error about one input key carries the key as data, beside where it is (file:line:column, or the file) and what
// is wrong, so that another front end can name it its own way: a QCSchema AtomicInput calls `scf.type` the field
// `keywords.scf_type` (app/qcschema.cpp). `text` says what is wrong with `{key}` standing where the key is named
// ("{key}: expected df or exact, got 'x'"); the message is `<where>: <text>` with `{key}` as "key 'scf.type'".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  Error(std::string where, std::string key, std::string text, const std::string& noun = "key")
      : std::runtime_error(compose(where, key, text, noun)), where_(std::move(where)), key_(std::move(key)),
        text_(std::move(text)) {}
  virtual int exit_code() const { return 1; }
  const std::string& key() const { return key_; }  // empty: the error names no single key
  const std::string& where() const { return where_; }
  const std::string& text() const { return text_; }

 private:
  static std::string compose(const std::string& where, const std::string& key, const std::string& text,
                             const std::string& noun) {
    std::string out = text;
    if (const auto at = out.find("{key}"); at != std::string::npos) out.replace(at, 5, noun + " '" + key + "'");
    return where.empty() ? out : where + ": " + out;
  }
  std::string where_, key_, text_;
};

// The same error with its key named otherwise: `field 'keywords.scf_type'`.
template <class E>
E renamed(const E& e, const std::string& name, const std::string& noun) {
  return E(e.where(), name, e.text(), noun);
}

// The YAML input or the command line: unknown key, wrong type, bad value, missing file.
class InputError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 2; }
};

// An integral (HDF5) file: missing dataset, wrong shape or type, non-finite values.
class IntegralFileError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 3; }
};

// A backend, precision or algorithm that was asked for but is unknown, not built, or lacks an op.
class UnsupportedError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 4; }
};

// The numbers do not allow the method: a metric that is not positive definite, a zero denominator.
class NumericalError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 5; }
};

// The calculation does not fit the memory the input allows.
class ResourceError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 6; }
};

// A phase whose smallest blocks do not fit in the bytes it was given: `needed` is what it needs at least. The
// memory plan (app/plan.hpp within_memory) turns it into the one line that names the phase and the minimum `memory` for the whole
// run (what the phase needs plus what is held beside it).
class PhaseTooLarge : public ResourceError {
 public:
  PhaseTooLarge(std::string phase, double needed, const std::string& message)
      : ResourceError(message), phase_(std::move(phase)), needed_(needed) {}
  const std::string& phase() const { return phase_; }
  double needed() const { return needed_; }

 private:
  std::string phase_;
  double needed_;
};

// Writing results failed (disk full, directory missing, permission).
class OutputError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return 7; }
};

}  // namespace dfmp2
