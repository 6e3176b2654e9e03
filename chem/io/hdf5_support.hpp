#pragma once
// What the integral file's reader (chem/io/integral_file.cpp) and writer (chem/io/integral_file_writer.cpp) share of HDF5:
// identifiers closed by their owner, HDF5's own error printing silenced, and its innermost error for the one line.
#include <fmt/format.h>
#include <hdf5.h>

#include <string>

namespace dfmp2::chem::hdf5 {

// HDF5 prints its own error stack to stderr by default; this program reports one line instead.
struct SilenceHdf5 {
  SilenceHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};

// Owns one HDF5 identifier and closes it with the matching function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The innermost description on HDF5's error stack ("data error detected by Fletcher32 checksum", "inflate()
// failed", "incorrect metadata checksum ..."), for the one-line message; empty when the stack holds none.
inline std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc != nullptr) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &reason);
  return reason;
}

inline std::string with_reason(const std::string& what) {
  const std::string reason = hdf5_reason();
  return reason.empty() ? what : fmt::format("{} ({})", what, reason);
}

}  // namespace dfmp2::chem::hdf5
