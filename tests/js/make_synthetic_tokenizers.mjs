// Small synthetic tokenizers for the components the real ones in
// ../shared/models do not use (WordPiece + BertNormalizer/BertPreTokenizer +
// BertProcessing, Unigram + Metaspace + NFKC, GPT-2 style ByteLevel with the
// built-in regex and prefix space + RobertaProcessing, and a Sequence of
// NFD/StripAccents/Lowercase + WhitespaceSplit/Digits/Punctuation).  Their
// vocabularies are generated here from the corpus word lists, so they are
// deterministic and contain no external data.
//   node make_synthetic_tokenizers.mjs OUT_DIR   -> OUT_DIR/<name>/tokenizer.json
import fs from 'node:fs';
import path from 'node:path';
import { generateCorpus } from './corpus.mjs';

const outDir = process.argv[2];
if (!outDir) { console.error('usage: node make_synthetic_tokenizers.mjs OUT_DIR'); process.exit(2); }

// word frequencies over the corpus (valid UTF-8 entries only)
const td = new TextDecoder('utf-8', { fatal: true });
const freq = new Map();
for (const b of generateCorpus()) {
  let s;
  try { s = td.decode(b); } catch { continue; }
  for (const w of s.toLowerCase().split(/[\s\p{P}\p{S}]+/u)) if (w) freq.set(w, (freq.get(w) ?? 0) + 1);
}
const words = [...freq.entries()].filter(([w]) => [...w].length <= 12).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
  .slice(0, 1500).map(([w]) => w);
const chars = [...new Set([...'abcdefghijklmnopqrstuvwxyz0123456789!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~', ...words.join('')])].sort();

function write(name, doc) {
  fs.mkdirSync(path.join(outDir, name), { recursive: true });
  fs.writeFileSync(path.join(outDir, name, 'tokenizer.json'), JSON.stringify(doc));
  fs.writeFileSync(path.join(outDir, name, 'tokenizer_config.json'), JSON.stringify({ clean_up_tokenization_spaces: false }));
}
const added = (list) => list.map(([id, content]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));

// 1. BERT-style WordPiece
{
  const vocab = {};
  for (const t of ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']) vocab[t] = Object.keys(vocab).length;
  for (const t of [...chars, ...chars.map((c) => '##' + c), ...words, ...words.slice(0, 400).map((w) => '##' + w)])
    if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  write('synthetic-wordpiece', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added([[0, '[PAD]'], [1, '[UNK]'], [2, '[CLS]'], [3, '[SEP]'], [4, '[MASK]']]),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', 3], cls: ['[CLS]', 2] },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  });
}

// 2. Unigram + Metaspace (T5 / SentencePiece-unigram style)
{
  const seen = new Set(['<unk>', '</s>', '<pad>']);
  const vocab = [['<pad>', 0], ['</s>', 0], ['<unk>', 0]];
  const push = (t, s) => { if (!seen.has(t)) { seen.add(t); vocab.push([t, s]); } };
  push('▁', -2.5);
  words.forEach((w, i) => push('▁' + w, -3 - Math.log(1 + i) - 0.1 * w.length));
  words.slice(0, 300).forEach((w, i) => push(w, -6 - Math.log(1 + i)));
  chars.forEach((c, i) => push(c, -8 - 0.01 * i));
  for (let i = 0; i < 200; i++) { const w = words[i]; if (w.length > 3) push(w.slice(0, 2), -7 - 0.01 * i); }
  write('synthetic-unigram', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added([[0, '<pad>'], [1, '</s>'], [2, '<unk>']]),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    post_processor: { type: 'TemplateProcessing', single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [], special_tokens: { '</s>': { id: '</s>', ids: [1], tokens: ['</s>'] } } },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: 2, vocab, byte_fallback: false },
  });
}

// 3. GPT-2 / RoBERTa-style byte-level BPE: built-in regex, add_prefix_space
{
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  const b2u = new Map(bs.map((b, i) => [b, String.fromCodePoint(cs[i])]));
  const enc = new TextEncoder();
  const bl = (s) => [...enc.encode(s)].map((b) => b2u.get(b)).join('');
  const vocab = { '<s>': 0, '<pad>': 1, '</s>': 2, '<unk>': 3 };
  for (let b = 0; b < 256; b++) vocab[b2u.get(b)] = Object.keys(vocab).length;
  const merges = [];
  // merges that build " word" for the most frequent words, left to right
  for (const w of words.slice(0, 600)) {
    const syms = [...bl(' ' + w)];
    let cur = syms[0];
    for (let i = 1; i < syms.length; i++) {
      const next = cur + syms[i];
      if (!(next in vocab)) { vocab[next] = Object.keys(vocab).length; merges.push(`${cur} ${syms[i]}`); }
      cur = next;
    }
  }
  write('synthetic-bytelevel', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added([[0, '<s>'], [1, '<pad>'], [2, '</s>'], [3, '<unk>']]),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0], trim_offsets: true, add_prefix_space: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges },
  });
}

// 4. Sequence normalizer + Sequence pre-tokenizer (WhitespaceSplit, Digits, Punctuation), char BPE with byte fallback
{
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = Object.keys(vocab).length;
  for (const c of chars) if (!(c in vocab)) vocab[c] = Object.keys(vocab).length;
  const merges = [];
  for (const w of words.slice(0, 500)) {
    const syms = [...w];
    if (syms.some((c) => !(c in vocab))) continue;
    let cur = syms[0];
    for (let i = 1; i < syms.length; i++) {
      const next = cur + syms[i];
      if (!(next in vocab)) { vocab[next] = Object.keys(vocab).length; merges.push([cur, syms[i]]); }
      cur = next;
    }
  }
  write('synthetic-sequence', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added([[0, '<unk>'], [1, '<s>'], [2, '</s>']]),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' }, { type: 'Lowercase' }, { type: 'Strip', strip_left: true, strip_right: true }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: true }, { type: 'Punctuation', behavior: 'Isolated' }] },
    post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [], special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } },
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }] },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', fuse_unk: true, byte_fallback: true, vocab, merges },
  });
}
console.log(`synthetic tokenizers written to ${outDir} (${words.length} words, ${chars.length} chars)`);
