#pragma once
// QCSchema in and out (README "QCSchema"): `dfmp2 input.json` reads a QCSchema AtomicInput (the JSON that QCEngine
// hands every program), runs it as the equivalent YAML input would run, and writes an AtomicResult, or a
// FailedOperation with the same message and error class the command line prints.
//
// The AtomicInput becomes a dfmp2 input mapping (its nodes keep their place in the JSON file, so messages point at
// line:column there) and goes through the one input reader (app/input.hpp):
//   molecule        symbols, geometry (bohr), molecular_charge, molecular_multiplicity
//   model           method mp2, basis
//   driver          energy
//   keywords        Psi4's names where they exist (kQcKeywords: df_basis_mp2, df_basis_scf, scf_type, mp2_type,
//                   freeze_core, e_convergence, d_convergence, maxiter, guess), and every dfmp2 input key as
//                   dfmp2_<key> (dfmp2_backends, dfmp2_memory, dfmp2_threads, dfmp2_scf: {jk_storage: ...}, ...)
// A field or keyword that does not apply is an InputError naming it (`field 'keywords.foo'`), as is an unsupported
// driver or method.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/input.hpp"
#include "app/run.hpp"
#include "linalg/comm.hpp"

namespace dfmp2::app {

// The AtomicInput's field for a dfmp2 input key: `scf.type` is `keywords.scf_type`, `basis` `model.basis`, a key
// without a QCSchema name `keywords.dfmp2_<key>`.
std::string qcschema_field(const std::string& key);
// An error about an input key (linalg/errors.hpp: the key is data) with the key named as the AtomicInput's field;
// an error that names no key, unchanged.
template <class E>
E in_qcschema_names(const E& e) {
  return e.key().empty() ? e : renamed(e, qcschema_field(e.key()), "field");
}

// A file named *.json is a QCSchema AtomicInput.
bool is_qcschema_path(const std::string& path);

// Reads and checks an AtomicInput into the Input its YAML equivalent gives; Input::qcschema keeps the JSON as read.
Input read_qcschema_input(const std::string& path, int node_ranks = 1);

// The AtomicResult of a calculation whose input was an AtomicInput: the results file (results_json) with the input's
// id, molecule, driver, model, keywords and protocols as given.
nlohmann::json qcschema_result(const Calculation& calc);

// A FailedOperation: `input` is the AtomicInput as read, or null when the file could not be read as JSON; the
// message is the line the command line prints ("dfmp2: error: ..."), the error type follows the exit code.
nlohmann::json qcschema_failure(const nlohmann::json& input, const linalg::FailureReport& report,
                                const std::string& printed_line);

// Where a QCSchema run writes its AtomicResult or FailedOperation without --json: beside the input, with ".json"
// replaced by ".result.json".
std::string qcschema_default_output(const std::string& input_path);

}  // namespace dfmp2::app
