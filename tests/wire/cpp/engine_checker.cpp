// The engine-side oracle: verify a blob as hipDNN's C++ does (flatbuffers::Verifier, default
// options), unpack it into the object API and pack it again (Finish(T::Pack(builder, t))),
// printing "verified" or "refused" and then the repacked bytes in hex. Built against flatc's
// output for hipDNN's unmodified engine_config.fbs, engine_details.fbs and knob_value.fbs.
//
// usage: engine_checker config|details|knob <file>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine_details_generated.h"

using namespace hipdnn_flatbuffers_sdk::data_objects;

static void hex(const flatbuffers::FlatBufferBuilder& fbb) {
    const uint8_t* p = fbb.GetBufferPointer();
    for (size_t i = 0; i < fbb.GetSize(); ++i) std::printf("%02x", p[i]);
    std::printf("\n");
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const std::string kind = argv[1];
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    flatbuffers::Verifier verifier(buf.data(), buf.size());
    flatbuffers::FlatBufferBuilder fbb;
    bool ok = false;
    if (kind == "config") {
        ok = VerifyEngineConfigBuffer(verifier);
        if (ok) {
            std::unique_ptr<EngineConfigT> t(GetEngineConfig(buf.data())->UnPack());
            fbb.Finish(EngineConfig::Pack(fbb, t.get()));
        }
    } else if (kind == "details") {
        ok = VerifyEngineDetailsBuffer(verifier);
        if (ok) {
            std::unique_ptr<EngineDetailsT> t(GetEngineDetails(buf.data())->UnPack());
            fbb.Finish(EngineDetails::Pack(fbb, t.get()));
        }
    } else if (kind == "knob") {
        ok = verifier.VerifyBuffer<Knob>(nullptr);
        if (ok) {
            std::unique_ptr<KnobT> t(flatbuffers::GetRoot<Knob>(buf.data())->UnPack());
            fbb.Finish(Knob::Pack(fbb, t.get()));
        }
    } else {
        return 2;
    }
    std::printf("%s\n", ok ? "verified" : "refused");
    if (ok) hex(fbb);
    return 0;
}
