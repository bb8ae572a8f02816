"""The model, tokenizer, data and BLEU of the Multi30k examples, without anything of Steadfast.

examples/pytorch-transformer/model.py and examples/pytorch-ddp/model.py are identical copies:
each example directory is its own context (the files a trial gets), so neither can import from
the other.

- Tokenizer: a word vocabulary. A line is split on whitespace, each word into runs of letters and
  digits and single other characters; the first piece of each word carries "▁" (as in
  SentencePiece), so decoding is exact: "A girl's hat." -> ▁A ▁girl ' s ▁hat . -> "A girl's hat.".
  Pieces seen at least `min_freq` times in the training set make the vocabulary, in a fixed order
  (most frequent first, then alphabetical): the same data gives the same vocabulary.
- Model: nn.Transformer (pre-norm) with sinusoidal positions, separate source and target
  embeddings, greedy decoding.
- BLEU: corpus BLEU on whitespace tokens of the detokenized output against the raw references
  (4-gram precisions, geometric mean, brevity penalty, no smoothing), close to but not
  sacreBLEU, which tokenizes punctuation apart (13a) and so scores a little higher.
"""

import collections
import json
import math
import os
import re

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
WORD_START = "\u2581"  # "▁"
_PIECE = re.compile(r"\w+|[^\w\s]")

# Every hyperparameter the scripts read, with its default: the configuration of const.yaml.
DEFAULTS = {
    "data_dir": "../../../shared/data/multi30k-de-en-tiny",  # relative: to the context directory
    "seed": 1,
    "min_freq": 2,          # vocabulary: pieces seen at least this often in train
    "d_model": 128,
    "heads": 4,
    "ffn": 256,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "dropout": 0.1,
    "batch_size": 64,       # sentence pairs per batch (all ranks together)
    "lr": 0.003,            # the peak, reached at the end of the warmup
    "warmup": 100,          # batches
    "label_smoothing": 0.1,
    "clip_norm": 1.0,
    "report_every": 20,     # batches between training metric reports
    "device": "auto",       # auto: the GPU the slot gives (cuda), else the CPU; or cpu, cuda
}


def hyperparameters(given):
    """DEFAULTS updated with `given` (the trial's), each cast to its default's type. An unknown
    name is an error: a misspelt one would otherwise be ignored without a word."""
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown hyperparameters {unknown}; known: {sorted(DEFAULTS)}")
    hp = dict(DEFAULTS)
    for name, value in given.items():
        hp[name] = type(DEFAULTS[name])(value)
    if hp["device"] not in ("auto", "cpu", "cuda"):
        raise ValueError(f"hyperparameter device is {hp['device']!r}: auto, cpu or cuda")
    return hp


def pick_device(name):
    """The torch.device for the `device` hyperparameter. On a cluster a trial sees only the GPUs
    of its slots (CUDA_VISIBLE_DEVICES), so "cuda" is the slot's GPU; a CPU slot shows none."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("hyperparameter device is cuda, but torch sees no GPU (a CPU slot, or no driver)")
    return torch.device(name)


def tokenize(line):
    pieces = []
    for word in line.split():
        for i, piece in enumerate(_PIECE.findall(word)):
            pieces.append(WORD_START + piece if i == 0 else piece)
    return pieces


def detokenize(pieces):
    return "".join(pieces).replace(WORD_START, " ").strip()


class Vocab:
    def __init__(self, pieces):
        self.itos = list(pieces)
        self.stoi = {p: i for i, p in enumerate(self.itos)}

    @classmethod
    def build(cls, lines, min_freq):
        counts = collections.Counter(p for line in lines for p in tokenize(line))
        kept = sorted((p for p, n in counts.items() if n >= min_freq),
                      key=lambda p: (-counts[p], p))
        return cls(SPECIALS + kept)

    def __len__(self):
        return len(self.itos)

    def encode(self, line):
        return [self.stoi.get(p, UNK) for p in tokenize(line)]

    def decode(self, ids):
        """Ids up to the first EOS, as text; an unknown piece is shown as a word "<unk>"."""
        pieces = []
        for i in ids:
            if i == EOS:
                break
            if i == UNK:
                pieces.append(WORD_START + "<unk>")
            elif i > UNK:
                pieces.append(self.itos[i])
        return detokenize(pieces)


def build_vocabs(train_pairs, min_freq):
    """The source and target vocabularies of the training pairs."""
    return (Vocab.build([s for s, _ in train_pairs], min_freq),
            Vocab.build([t for _, t in train_pairs], min_freq))


def write_vocabs(directory, src_vocab, tgt_vocab):
    """Both vocabularies into `directory`/vocab.json (a checkpoint's)."""
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({"de": src_vocab.itos, "en": tgt_vocab.itos}, f, ensure_ascii=False)


def read_vocabs(directory):
    """The vocabularies write_vocabs put in `directory`."""
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    return Vocab(vocab["de"]), Vocab(vocab["en"])


def resolve_data_dir(context_directory, data_dir):
    """`data_dir` (absolute, or relative to the context directory) as an absolute path; a clear
    error when it is not a directory."""
    path = os.path.normpath(os.path.join(context_directory, os.path.expanduser(data_dir)))
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"data_dir {data_dir!r} (relative to the context directory {context_directory}) is "
            f"{path}, which is not a directory: set the hyperparameter data_dir to the folder "
            f"holding train.de, train.en, valid.de and valid.en (Multi30k de-en)")
    return path


def read_split(data_dir, split):
    """The (German, English) line pairs of `split` ("train", "valid" or "test")."""
    sides = []
    for lang in ("de", "en"):
        with open(os.path.join(data_dir, f"{split}.{lang}"), encoding="utf-8") as f:
            sides.append([line.rstrip("\n") for line in f])
    if len(sides[0]) != len(sides[1]):
        raise ValueError(f"{data_dir}: {split}.de has {len(sides[0])} lines, {split}.en "
                         f"{len(sides[1])}")
    return list(zip(*sides))


def encode_pairs(pairs, src_vocab, tgt_vocab, max_tokens=100):
    return [(src_vocab.encode(s)[:max_tokens], tgt_vocab.encode(t)[:max_tokens]) for s, t in pairs]


def batch_indices(step, n, batch_size, seed):
    """The examples of batch `step` (counted from 0 over the whole run): epoch after epoch, each
    a fresh permutation seeded by (seed, epoch), cut into whole batches. A function of the step
    alone, so a resumed run sees exactly the batches the interrupted one would have."""
    per_epoch = max(1, n // batch_size)
    epoch, i = divmod(step, per_epoch)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
    return order[i * batch_size:(i + 1) * batch_size].tolist()


def collate(examples, device=None):
    """Padded (source, target input, target output) tensors, batch first, on `device` (the
    CPU when None)."""
    src = pad_sequence([torch.tensor(s + [EOS]) for s, _ in examples], batch_first=True,
                       padding_value=PAD)
    tgt = pad_sequence([torch.tensor([BOS] + t + [EOS]) for _, t in examples], batch_first=True,
                       padding_value=PAD)
    if device is not None:
        src, tgt = src.to(device), tgt.to(device)
    return src, tgt[:, :-1], tgt[:, 1:]


def _sinusoids(length, dim):
    position = torch.arange(length).unsqueeze(1)
    rate = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table


class Translator(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, hp, max_positions=256):
        super().__init__()
        d = hp["d_model"]
        self.scale = math.sqrt(d)
        self.src_embed = nn.Embedding(src_vocab_size, d, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d, padding_idx=PAD)
        self.register_buffer("positions", _sinusoids(max_positions, d), persistent=False)
        self.dropout = nn.Dropout(hp["dropout"])
        self.transformer = nn.Transformer(
            d_model=d, nhead=hp["heads"], num_encoder_layers=hp["encoder_layers"],
            num_decoder_layers=hp["decoder_layers"], dim_feedforward=hp["ffn"],
            dropout=hp["dropout"], batch_first=True, norm_first=True)
        self.out = nn.Linear(d, tgt_vocab_size)

    def _embed(self, table, ids):
        return self.dropout(table(ids) * self.scale + self.positions[:ids.size(1)])

    def encode(self, src):
        return self.transformer.encoder(self._embed(self.src_embed, src),
                                        src_key_padding_mask=src == PAD)

    def decode(self, memory, src, tgt_in):
        """Logits for each target position. Padding sits at the end, so the causal mask alone
        keeps real positions from seeing it; padded positions are left out of the loss."""
        n = tgt_in.size(1)
        causal = torch.triu(torch.full((n, n), float("-inf"), device=tgt_in.device), diagonal=1)
        h = self.transformer.decoder(self._embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                                     memory_key_padding_mask=src == PAD)
        return self.out(h)

    def forward(self, src, tgt_in):
        return self.decode(self.encode(src), src, tgt_in)


@torch.no_grad()
def greedy(model, src, extra=10):
    """Greedy decoding of a batch: target ids per sentence, up to `extra` longer than its
    source batch (stops early once every sentence has ended)."""
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(src.size(1) + extra):
        step = model.decode(memory, src, ys)[:, -1].argmax(-1).masked_fill(done, PAD)
        ys = torch.cat([ys, step[:, None]], dim=1)
        done |= step == EOS
        if done.all():
            break
    return ys[:, 1:].tolist()


def bleu_stats(hypothesis, reference):
    """[hyp length, ref length, matches1, total1, ..., matches4, total4] on whitespace tokens;
    sums of these over sentences give the corpus's statistics."""
    h, r = hypothesis.split(), reference.split()
    stats = [len(h), len(r)]
    for n in range(1, 5):
        hyp = collections.Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
        ref = collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
        stats += [sum(min(c, ref[g]) for g, c in hyp.items()), max(len(h) - n + 1, 0)]
    return stats


def corpus_bleu(stats):
    """BLEU (0-100) from summed bleu_stats: 0 when some n-gram order has no match."""
    hyp_len, ref_len = stats[0], stats[1]
    matches, totals = stats[2::2], stats[3::2]
    if hyp_len == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * brevity * math.exp(log_precision)


@torch.no_grad()
def evaluate(model, examples, references, tgt_vocab, batch_size=100):
    """On `examples` (encoded pairs) and their raw `references`: (summed token cross-entropy
    without label smoothing, target tokens, summed BLEU statistics). Sums, so that shards of a
    validation set can be added up across ranks."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_sum, tokens, stats = 0.0, 0, [0] * 10
    for start in range(0, len(examples), batch_size):
        src, tgt_in, tgt_out = collate(examples[start:start + batch_size], device)
        logits = model(src, tgt_in)
        loss_sum += nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                tgt_out.reshape(-1), ignore_index=PAD,
                                                reduction="sum").item()
        tokens += int((tgt_out != PAD).sum())
        for ids, ref in zip(greedy(model, src), references[start:start + batch_size]):
            stats = [a + b for a, b in zip(stats, bleu_stats(tgt_vocab.decode(ids), ref))]
    model.train(was_training)
    return loss_sum, tokens, stats


def train_step(model, batch, criterion, optimizer, scheduler, clip_norm):
    """One optimizer step on `batch` (collate's three tensors); `model` may be wrapped
    (DistributedDataParallel), its parameters are the optimizer's. Returns (the batch's mean
    loss, its target tokens, the learning rate the step used)."""
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)
    loss = criterion(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], clip_norm)
    lr = optimizer.param_groups[0]["lr"]
    optimizer.step()
    scheduler.step()
    return loss.item(), int((tgt_out != PAD).sum()), lr


def inverse_sqrt(warmup):
    """LambdaLR's factor: linear warmup to 1 over `warmup` batches, then 1/sqrt decay."""
    def factor(step):
        step += 1
        return min(step / warmup, math.sqrt(warmup / step))
    return factor
