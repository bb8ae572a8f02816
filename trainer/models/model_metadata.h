// Reading a weights file's __metadata__ (string -> string) back into a model configuration:
// each reader names the key and the file's value in its error ("__metadata__ heads: 'x' is not
// an integer", "__metadata__ has no 'd_model'").
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "trainer/kernels/backend.h"

namespace sf {

using Metadata = std::map<std::string, std::string>;

Result<int64_t> MetaInt(const Metadata& m, const std::string& key);
Result<bool> MetaBool(const Metadata& m, const std::string& key);  // "true" / "false"
Result<float> MetaFloat(const Metadata& m, const std::string& key);
// The value of `key`, or `def` when the file has none (keys added after files were written).
Result<float> MetaFloatOr(const Metadata& m, const std::string& key, float def);

// The sizes every family's weights carry: src_vocab (read only when `source`: a language model
// has none), tgt_vocab, pad_id (checked to fit an int32) and max_positions.
struct MetaSizes {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int32_t pad_id = 1;
  int64_t max_positions = 0;
};
Result<MetaSizes> ReadMetaSizes(const Metadata& m, bool source);

// The feed-forward activation under "activation": "relu" or "gelu".
Result<Activation> MetaActivation(const Metadata& m);
const char* ActivationText(Activation a);

// Formats a float for __metadata__ so that MetaFloat reads back the same float.
std::string MetaText(float v);

}  // namespace sf
