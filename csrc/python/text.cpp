// tmm._C.Tokenizer: tmm::text::Tokenizer for tmm.text. Encoding and decoding
// run without the GIL; pybind turns std::invalid_argument into ValueError,
// std::out_of_range into IndexError and std::runtime_error into RuntimeError.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "python/bindings.h"
#include "tmm/text/tokenizer.h"

namespace tmm::python {

namespace py = pybind11;

void bind_text(py::module& m) {
  using tmm::text::Tokenizer;
  py::class_<Tokenizer>(m, "Tokenizer",
                        "Text <-> token ids: tmm's byte-level default or a byte-level BPE tokenizer.json")
      .def_static("byte_level", &Tokenizer::byte_level, "ids 0..255 are the UTF-8 bytes of the text")
      .def_static("from_file", &Tokenizer::from_file, py::arg("path"),
                  "A byte-level BPE tokenizer.json written by the `tokenizers` package")
      .def_static("from_str", &Tokenizer::from_json_text, py::arg("json"), "The same, from the JSON text")
      .def(
          "encode",
          [](const Tokenizer& self, const std::string& text, bool add_special_tokens) {
            py::gil_scoped_release release;
            return self.encode(text, add_special_tokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = true,
          "list[int]: the ids of a str (its UTF-8) or of any bytes, with the special tokens the "
          "post-processor adds around them (e.g. Llama 3's <|begin_of_text|>) unless add_special_tokens=False")
      .def(
          "pre_tokenize",
          [](const Tokenizer& self, const std::string& text) {
            std::vector<std::string> pieces;
            {
              py::gil_scoped_release release;
              pieces = self.pre_tokenize(text);
            }
            py::list out;
            for (const std::string& p : pieces) out.append(py::bytes(p));
            return out;
          },
          py::arg("text"),
          "list[bytes]: the pieces the model encodes one at a time (added tokens, then the normalized, "
          "pre-tokenized text between them)")
      .def("decode", &Tokenizer::decode, py::arg("ids"), py::call_guard<py::gil_scoped_release>(),
           "str: ill-formed UTF-8 in the decoded bytes becomes U+FFFD; special tokens are kept")
      .def(
          "token_bytes", [](const Tokenizer& self, int64_t id) { return py::bytes(self.token_bytes(id)); },
          py::arg("id"), "bytes: one token's raw bytes (for streaming output)")
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"),
           "The id of a vocabulary token (e.g. 'Ġthe', '<|endoftext|>'), or None")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "One more than the largest id")
      .def_property_readonly("kind", &Tokenizer::kind, "'byte' or 'bpe'")
      .def("__repr__", [](const Tokenizer& self) {
        return "tmm.text.Tokenizer(kind='" + self.kind() + "', vocab_size=" + std::to_string(self.vocab_size()) + ")";
      });
}

}  // namespace tmm::python
