// sf-spm: the only program that links libsentencepiece.
//
// Debian's libsentencepiece carries its own copy of Protobuf-lite and Abseil and exports their
// symbols; in a process that also loads gRPC's libprotobuf the two copies collide during static
// initialisation (duplicate descriptor registration, a segfault before main). So SentencePiece
// runs in this small helper, and sf_spm (sentencepiece_model.cc) talks to it:
//
//   sf-spm train --output=M --vocab_size=N --model_type=bpe --character_coverage=1.0
//                --input_sentence_size=N --num_threads=N --seed=N FILE...
//       trains a model and writes it to M (temporary name, then rename). Exit 0 or 1 + message.
//   sf-spm serve MODEL
//       loads MODEL, prints "ok <vocab_size>" (or "error <message>" and exits 1), then answers
//       one request per stdin line with one stdout line, until stdin closes:
//         E <text>          -> space-separated ids of the text (no BOS/EOS)
//         D <id> <id> ...   -> the detokenized text
//         P <id>            -> the piece of one id
//
// Special ids follow fairseq's layout: bos 0, pad 1, eos 2, unk 3.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/command_line.h"

namespace sentencepiece::logging {
// Exported by libsentencepiece (not declared in its public headers): silences the trainer's
// INFO chatter while we train.
int GetMinLogLevel();
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace {

struct TrainOptions {
  std::string output, model_type = "bpe", coverage = "1.0";
  long long vocab_size = 8000, sentence_size = 2000000, threads = 2, seed = 1234;
  std::vector<std::string> inputs;
};

void AddTrainFlags(CLI::App& cmd, TrainOptions* o) {
  cmd.add_option("--output", o->output, "where the model goes (written under a temporary name, then renamed)")
      ->required();
  cmd.add_option("--vocab_size", o->vocab_size, "vocabulary size")->check(sf::cmdline::AtLeast(1));
  cmd.add_option("--model_type", o->model_type, "SentencePiece model type")
      ->check(CLI::IsMember({"bpe", "unigram", "char", "word"}));
  cmd.add_option("--character_coverage", o->coverage, "share of characters the model covers");
  cmd.add_option("--input_sentence_size", o->sentence_size, "sentences sampled for training")
      ->check(sf::cmdline::AtLeast(1));
  cmd.add_option("--num_threads", o->threads, "training threads")->check(sf::cmdline::AtLeast(1));
  cmd.add_option("--seed", o->seed, "random seed");
  cmd.add_option("FILE", o->inputs, "training text, one sentence per line")->required();
}

int Train(const TrainOptions& o) {
  const std::string& output = o.output;
  const std::string& model_type = o.model_type;
  const std::string& coverage = o.coverage;
  const long long vocab_size = o.vocab_size, sentence_size = o.sentence_size, threads = o.threads, seed = o.seed;
  const std::vector<std::string>& inputs = o.inputs;
  std::string prefix = output + ".tmp." + std::to_string(::getpid());
  std::ostringstream flags;
  flags << "--input=";
  for (size_t i = 0; i < inputs.size(); ++i) flags << (i ? "," : "") << inputs[i];
  flags << " --model_prefix=" << prefix << " --vocab_size=" << vocab_size
        << " --model_type=" << model_type << " --character_coverage=" << coverage
        << " --bos_id=0 --pad_id=1 --eos_id=2 --unk_id=3 --num_threads=" << threads
        << " --input_sentence_size=" << sentence_size
        << " --shuffle_input_sentence=false --hard_vocab_limit=false"
        << " --max_sentence_length=65536";
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed));
  sentencepiece::logging::SetMinLogLevel(1);
  auto st = sentencepiece::SentencePieceTrainer::Train(flags.str());
  std::error_code ec;
  std::filesystem::remove(prefix + ".vocab", ec);
  if (!st.ok()) {
    std::filesystem::remove(prefix + ".model", ec);
    std::cerr << "SentencePiece training failed: " << st.message() << "\n";
    return 1;
  }
  std::filesystem::rename(prefix + ".model", output, ec);
  if (ec) {
    std::filesystem::remove(prefix + ".model", ec);
    std::cerr << "can't write " << output << ": " << ec.message() << "\n";
    return 1;
  }
  return 0;
}

int Serve(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  auto st = sp.Load(model);
  if (!st.ok()) {
    std::cout << "error not a SentencePiece model: " << st.message() << std::endl;
    return 1;
  }
  std::cout << "ok " << sp.GetPieceSize() << std::endl;
  std::string line, out;
  std::vector<int> ids;
  while (std::getline(std::cin, line)) {
    if (line.size() < 2) {
      std::cout << "\n";
    } else if (line[0] == 'E') {
      ids.clear();
      sp.Encode(std::string_view(line).substr(2), &ids);
      out.clear();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ' ';
        out += std::to_string(ids[i]);
      }
      std::cout << out << "\n";
    } else if (line[0] == 'D') {
      ids.clear();
      std::istringstream in(line.substr(2));
      int id;
      while (in >> id) ids.push_back(id);
      out.clear();
      sp.Decode(ids, &out);
      for (char& c : out) {
        if (c == '\n' || c == '\r') c = ' ';
      }
      std::cout << out << "\n";
    } else if (line[0] == 'P') {
      int id = std::atoi(line.c_str() + 2);
      std::cout << (id >= 0 && id < sp.GetPieceSize() ? sp.IdToPiece(id) : "<invalid>") << "\n";
    } else {
      std::cout << "\n";
    }
    std::cout.flush();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app("SentencePiece for Steadfast: trains models and serves tokenization to sf_spm.", "sf-spm");
  sf::cmdline::UseDefaults(app);
  app.require_subcommand(1);
  TrainOptions train;
  CLI::App* train_cmd = app.add_subcommand("train", "train a model on FILE... and write it to --output");
  AddTrainFlags(*train_cmd, &train);
  std::string model;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve", "load MODEL, print 'ok <vocab size>', then answer stdin requests: E text | D ids | P id");
  serve_cmd->add_option("MODEL", model, "a SentencePiece model file")->required();
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  if (serve_cmd->parsed()) return Serve(model);
  return Train(train);
}
