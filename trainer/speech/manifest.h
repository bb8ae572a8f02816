// Speech manifests: which audio files a split holds and what is said in them.
//
// Format (one file per split, e.g. train.tsv, valid.tsv, test.tsv): UTF-8 text, tab-separated,
// one utterance per line. The first line is a header naming the columns, in any order:
//   audio     required  path of a WAV/FLAC file; relative paths are resolved against the
//                       manifest's directory (so a corpus directory can move as a whole)
//   duration  required  the audio's length in seconds: a positive finite number
//   text      required  the transcript, as spoken (normalised later, see char_vocab.h)
//   id        optional  a unique name for the utterance (default "line N")
//   speaker   optional  who speaks it (default empty)
// Any other column name is an error that names it and lists the known ones; a name given twice
// is an error. Fields are not quoted: a field can hold neither a tab nor a line break. Every row
// has exactly as many fields as the header. Spaces around a field are trimmed; a UTF-8 byte-order
// mark before the header and a '\r' before each '\n' are ignored; empty lines are ignored (they
// hold no utterance). A transcript that is empty after trimming is an error, as is a manifest
// with no utterance or two utterances with the same id.
//
// Why TSV and not OpenSeq2Seq's CSV: transcripts hold commas (and quotes) but never tabs, so TSV
// needs no quoting rules; it is the format of fairseq's speech_to_text manifests and of
// wav2vec's, and `cut -f` reads it.
//
// Errors are kInvalidArgument (kNotFound for a missing manifest) with a message that names the
// file, the line and the column: "/data/train.tsv:12: 4 fields, the header has 5",
// "/data/train.tsv:7: column text: empty transcript". The audio files themselves are not opened
// here (audio.h). Pure function, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::speech {

struct Utterance {
  std::string id;       // the id column, or "line N" when there is none or it is empty
  std::string audio;    // the audio file's path, resolved against the manifest's directory
  double duration = 0;  // seconds, as the manifest states it (> 0)
  std::string text;     // the transcript as written (trimmed, never empty)
  std::string speaker;  // "" when the manifest has no speaker column
  int64_t line = 0;     // 1-based line of the manifest (the header is line 1)
};

// Reads and checks a whole manifest; the utterances come in file order.
Result<std::vector<Utterance>> ReadManifest(const std::string& path);

}  // namespace sf::speech
