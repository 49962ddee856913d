// The pieces of tmm._C, one source each; module.cpp's PYBIND11_MODULE calls them.
#pragma once

#include <pybind11/pybind11.h>

namespace tmm::python {

// tmm._C._LanguageModel and the model functions (csrc/python/models.cpp).
void bind_models(pybind11::module& m);

// tmm._C.Tokenizer (csrc/python/text.cpp).
void bind_text(pybind11::module& m);

void bind_distill(pybind11::module& m);

}  // namespace tmm::python
