// A checker of exported graph files built from flatc's C++ output for hipDNN's schemas exactly
// as they are (copied unchanged; see tests/wire/verbatim_checker.py).
//
//   export_checker FILE...   verify each FILE as hipDNN does (flatbuffers::Verifier, default
//                            options, no identifier) and print one JSON object per line: whether
//                            it verified and, when it did, the graph's name, its tensors (uid,
//                            name, data type number, dims, strides, virtual flag) and its nodes
//                            (name, the NodeAttributes member's name). Names are printed as hex
//                            of their bytes.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "graph_generated.h"

namespace fo = hipdnn_flatbuffers_sdk::data_objects;

static std::string hex(const flatbuffers::String *s) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "\"";
  if (s != nullptr) {
    for (unsigned char c : s->str()) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out + "\"";
}

static std::string longs(const flatbuffers::Vector<int64_t> *v) {
  std::string out = "[";
  if (v != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      out += (i ? ", " : "") + std::to_string(v->Get(i));
    }
  }
  return out + "]";
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
    flatbuffers::Verifier verifier(data.data(), data.size());
    bool verified = !data.empty() && fo::VerifyGraphBuffer(verifier);
    std::cout << "{\"verified\": " << (verified ? "true" : "false");
    if (verified) {
      const fo::Graph *g = fo::GetGraph(data.data());
      std::cout << ", \"name\": " << hex(g->name()) << ", \"tensors\": [";
      if (g->tensors() != nullptr) {
        for (flatbuffers::uoffset_t k = 0; k < g->tensors()->size(); ++k) {
          const fo::TensorAttributes *t = g->tensors()->Get(k);
          std::cout << (k ? ", " : "") << "{\"uid\": " << t->uid() << ", \"name\": "
                    << hex(t->name()) << ", \"data_type\": " << static_cast<int>(t->data_type())
                    << ", \"dims\": " << longs(t->dims()) << ", \"strides\": "
                    << longs(t->strides()) << ", \"virtual\": "
                    << (t->virtual_() ? "true" : "false") << "}";
        }
      }
      std::cout << "], \"nodes\": [";
      if (g->nodes() != nullptr) {
        for (flatbuffers::uoffset_t k = 0; k < g->nodes()->size(); ++k) {
          const fo::Node *n = g->nodes()->Get(k);
          std::cout << (k ? ", " : "") << "{\"name\": " << hex(n->name()) << ", \"type\": \""
                    << fo::EnumNameNodeAttributes(n->attributes_type()) << "\"}";
        }
      }
      std::cout << "]";
    }
    std::cout << "}" << std::endl;
  }
  return 0;
}
