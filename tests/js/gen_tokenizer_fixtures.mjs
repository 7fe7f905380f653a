// Generate the expected ids / texts for sglc's tokenizer exactness test with
// Hugging Face's tokenizer logic (@huggingface/transformers, i.e. the
// @huggingface/tokenizers engine).
//
//   node gen_tokenizer_fixtures.mjs OUT_DIR MODEL_DIR...
//
// Writes OUT_DIR/<name>.jsonl, one line per corpus string:
//   {"hex": input bytes, "ids": encode(add_special_tokens=true),
//    "ids0": encode(add_special_tokens=false),
//    "dec": decode(ids), "dec_skip": decode(ids, skip_special_tokens=true)}
// Input bytes are turned into a string with TextDecoder (invalid UTF-8 ->
// U+FFFD per maximal subpart), the rule sglc documents.
//
// One rule of Python transformers is applied on top, because SGLang runs
// Python: LlamaTokenizer(Fast)/GemmaTokenizer(Fast)/CodeLlama rebuild the
// post-processor from add_bos_token/add_eos_token in tokenizer_config.json
// (update_post_processor).  transformers.js does not, so we rebuild the
// same TemplateProcessing here before constructing the tokenizer.
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { generateCorpus } from './corpus.mjs';

const REBUILD = new Set(['LlamaTokenizer', 'LlamaTokenizerFast', 'GemmaTokenizer', 'GemmaTokenizerFast',
  'CodeLlamaTokenizer', 'CodeLlamaTokenizerFast']);

function content(v) { return typeof v === 'string' ? v : v && typeof v === 'object' ? v.content : null; }

export function loadReference(dir) {
  const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  let cfg = {};
  try { cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')); } catch { /* none */ }
  if (REBUILD.has(cfg.tokenizer_class)) {
    const bos = content(cfg.bos_token), eos = content(cfg.eos_token);
    const addBos = cfg.add_bos_token ?? true, addEos = cfg.add_eos_token ?? false;
    const single = [];
    const specials = {};
    const idOf = (tok) => {
      const a = tj.added_tokens.find((x) => x.content === tok);
      return a ? a.id : tj.model.vocab[tok];
    };
    if (addBos && bos != null && idOf(bos) !== undefined) {
      single.push({ SpecialToken: { id: bos, type_id: 0 } });
      specials[bos] = { id: bos, ids: [idOf(bos)], tokens: [bos] };
    }
    single.push({ Sequence: { id: 'A', type_id: 0 } });
    if (addEos && eos != null && idOf(eos) !== undefined) {
      single.push({ SpecialToken: { id: eos, type_id: 0 } });
      specials[eos] = { id: eos, ids: [idOf(eos)], tokens: [eos] };
    }
    tj.post_processor = { type: 'TemplateProcessing', single, pair: single, special_tokens: specials };
  }
  return new Tokenizer(tj, cfg);
}

// Where transformers.js is known to differ from the Rust tokenizers crate
// (which Python transformers, and so SGLang, runs) sglc follows the crate,
// and the fixture marks the row {"skip": reason} instead of an expectation.
// This only concerns the synthetic tokenizers (tests/js/make_synthetic_
// tokenizers.mjs); the real ones in ../shared/models are compared on every
// string.  The differences:
//  - the ByteLevel pre-tokenizer's built-in regex runs with JS's \s, which
//    includes U+FEFF and leaves out U+0085 (the crate: Unicode White_Space);
//  - WhitespaceSplit uses JS \S (same two characters);
//  - Digits uses JS \d (ASCII only; the crate: any numeric character);
//  - BertNormalizer isolates CJK by UTF-16 unit, missing astral ideographs;
//  - Lowercase uses JS toLowerCase, which turns a final capital sigma into
//    U+03C2 (the crate lowercases character by character);
//  - BertNormalizer's clean_text keeps unassigned code points (Cn), which
//    the crate and the original BERT code drop as "other" characters.
const JS_DIVERGENCES = {
  'synthetic-bytelevel': [[/[\u0085\uFEFF]/u, 'JS \\s in the ByteLevel regex (U+0085/U+FEFF)']],
  'synthetic-sequence': [[/[\u0085\uFEFF]/u, 'JS \\S in WhitespaceSplit (U+0085/U+FEFF)'],
    [/[^\P{N}0-9]/u, 'JS \\d in Digits (non-ASCII digits)'], [/\u03A3/u, 'JS final-sigma lowercase']],
  'synthetic-wordpiece': [[/[\u{20000}-\u{2FA1F}]/u, 'JS UTF-16 CJK check in BertNormalizer'],
    [/\u03A3/u, 'JS final-sigma lowercase'], [/\p{Cn}/u, 'JS keeps unassigned code points in BertNormalizer']],
};

function divergence(name, text) {
  for (const [re, why] of JS_DIVERGENCES[name] ?? []) if (re.test(text)) return why;
  return null;
}

function decode(tok, ids, skip) {
  if (ids.length === 0) return '';
  return tok.decode(ids, { skip_special_tokens: skip });
}

async function main() {
  const [outDir, ...dirs] = process.argv.slice(2);
  if (!outDir || dirs.length === 0) {
    console.error('usage: node gen_tokenizer_fixtures.mjs OUT_DIR MODEL_DIR...');
    process.exit(2);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const corpus = generateCorpus();
  const td = new TextDecoder('utf-8', { ignoreBOM: true }); // keep a BOM, as Python's decode does
  for (const dir of dirs) {
    const name = path.basename(dir);
    const t0 = Date.now();
    const tok = loadReference(dir);
    const lines = [];
    let skipped = 0;
    for (const bytes of corpus) {
      const text = td.decode(bytes);
      const why = divergence(name, text);
      if (why) {
        lines.push(JSON.stringify({ hex: Buffer.from(bytes).toString('hex'), skip: why }));
        skipped++;
        continue;
      }
      const ids = tok.encode(text, { add_special_tokens: true }).ids;
      const ids0 = tok.encode(text, { add_special_tokens: false }).ids;
      lines.push(JSON.stringify({
        hex: Buffer.from(bytes).toString('hex'), ids, ids0,
        dec: decode(tok, ids, false), dec_skip: decode(tok, ids, true),
      }));
    }
    fs.writeFileSync(path.join(outDir, `${name}.jsonl`), lines.join('\n') + '\n');
    console.error(`${name}: ${corpus.length} strings (${skipped} marked as JS-vs-crate divergences) in ${Date.now() - t0} ms`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();
