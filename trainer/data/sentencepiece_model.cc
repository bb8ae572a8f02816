// SentencePiece lives only here: this file includes no gRPC, Protobuf or Abseil header (see the
// header comment).
#include "trainer/data/sentencepiece_model.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sentencepiece::logging {
// Exported by libsentencepiece (not declared in its public headers): silences the trainer's
// INFO chatter while we train.
int GetMinLogLevel();
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace sf::data {

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceModel::SentencePieceModel() : impl_(std::make_unique<Impl>()) {}
SentencePieceModel::~SentencePieceModel() = default;

Status SentencePieceModel::Train(const SentencePieceTrainOptions& o) {
  if (o.model_type != "bpe" && o.model_type != "unigram" && o.model_type != "char" &&
      o.model_type != "word") {
    return InvalidArgument("tokenizer.model_type: '" + o.model_type +
                           "' must be one of bpe, unigram, char, word");
  }
  if (o.vocab_size < 8) {
    return InvalidArgument("tokenizer.vocab_size: " + std::to_string(o.vocab_size) +
                           " is too small");
  }
  if (o.input_files.empty()) return InvalidArgument("no input files to train SentencePiece on");
  if (o.output_model_path.empty()) return InvalidArgument("no output model path");
  for (const auto& f : o.input_files) {
    if (f.find(',') != std::string::npos) {
      return InvalidArgument("file " + f + ": SentencePiece can't train on a path with a comma");
    }
  }
  std::string prefix = o.output_model_path + ".tmp." + std::to_string(::getpid());
  std::ostringstream args;
  args << "--input=";
  for (size_t i = 0; i < o.input_files.size(); ++i) args << (i ? "," : "") << o.input_files[i];
  args << " --model_prefix=" << prefix << " --vocab_size=" << o.vocab_size
       << " --model_type=" << o.model_type << " --character_coverage=" << o.character_coverage
       << " --bos_id=" << kBosId << " --pad_id=" << kPadId << " --eos_id=" << kEosId
       << " --unk_id=" << kUnkId << " --num_threads=" << o.num_threads
       << " --input_sentence_size=" << o.input_sentence_size
       << " --shuffle_input_sentence=false --hard_vocab_limit=false"
       << " --max_sentence_length=65536";
  sentencepiece::SetRandomGeneratorSeed(o.seed);
  int old_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(1);
  auto st = sentencepiece::SentencePieceTrainer::Train(args.str());
  sentencepiece::logging::SetMinLogLevel(old_level);
  std::error_code ec;
  std::filesystem::remove(prefix + ".vocab", ec);
  if (!st.ok()) {
    std::filesystem::remove(prefix + ".model", ec);
    return Internal("SentencePiece training failed: " + std::string(st.message()));
  }
  std::filesystem::rename(prefix + ".model", o.output_model_path, ec);
  if (ec) {
    std::filesystem::remove(prefix + ".model", ec);
    return Internal("can't write " + o.output_model_path + ": " + ec.message());
  }
  return Status::Ok();
}

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("tokenizer model " + path + ": can't open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  auto r = FromSerialized(bytes.str());
  if (!r.ok()) return r.status().WithContext("tokenizer model " + path);
  return r;
}

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::FromSerialized(
    std::string_view bytes) {
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  auto st =
      m->impl_->processor.LoadFromSerializedProto(std::string_view(bytes.data(), bytes.size()));
  if (!st.ok()) {
    return InvalidArgument("not a SentencePiece model: " + std::string(st.message()));
  }
  m->serialized_.assign(bytes.data(), bytes.size());
  return m;
}

std::vector<int32_t> SentencePieceModel::Encode(std::string_view text) const {
  std::vector<int> ids;
  impl_->processor.Encode(std::string_view(text.data(), text.size()), &ids);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceModel::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int32_t id : ids) {
    if (id == kEosId) break;
    if (id == kBosId || id == kPadId) continue;
    if (id < 0 || id >= vocab_size()) id = kUnkId;
    kept.push_back(id);
  }
  std::string out;
  impl_->processor.Decode(kept, &out);
  return out;
}

std::string SentencePieceModel::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "<invalid>";
  return impl_->processor.IdToPiece(id);
}

int32_t SentencePieceModel::vocab_size() const { return impl_->processor.GetPieceSize(); }

}  // namespace sf::data
