// Deterministic tokenizer test corpus: >= 5,000 byte strings built from a
// seeded PRNG and small hand-written word lists (no external data).
// Each entry is a Uint8Array; a few are deliberately invalid UTF-8.
// The same corpus feeds the exactness test and the speed benchmark.

function mulberry32(seed) {
  return function () {
    seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the a an of to and in is was for on with as by at from it that this be are were not but or have has had ' +
  'time people year way day man thing woman life child world school state family student group country problem ' +
  'hand part place case week company system program question work government number night point home water room ' +
  'mother area money story fact month lot right study book eye job word business issue side kind head house service ' +
  'friend father power hour game line end member law car city community name president team minute idea kid body ' +
  'information back parent face others level office door health person art war history party result change morning ' +
  'reason research girl guy moment air teacher force education little girl named Lily once upon happy played ' +
  "don't can't I'm you're we've they'll she'd it's isn't wouldn't Hello HELLO World Tokenizer tokenization " +
  'supercalifragilisticexpialidocious antidisestablishmentarianism naïve café résumé coöperate façade jalapeño'
).split(' ');

const CODE = [
  'def foo(x, y=3):\n    return x ** 2 + y  # comment\n',
  'for (int i = 0; i < n; i++) {\n\tsum += a[i] * b[i];\n}\n',
  'const result = await fetch(`https://example.com/api?q=${query}`);\n',
  'SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n',
  'if x != None and len(xs) > 0:\n        print(f"{x!r}: {xs[-1]:>10.3f}")\n',
  '<div class="box" id=\'main\'>&nbsp;&lt;tag&gt;</div>\n',
  'fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![]; Ok(()) }',
  '    \t  mixed\t\tindent\r\n\r\nwindows line endings\r\n',
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b"}}',
  'x = lambda *args, **kw: (args, kw)\n\n\n\n',
  '   leading spaces and trailing spaces   ',
];

const SPECIALS = [
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<s>', '</s>', '<unk>', '<pad>', '<bos>', '<eos>',
  '<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>',
  '<start_of_turn>', '<end_of_turn>', '<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>',
  '<|start_story|>', '<|end_story|>', '<think>', '</think>', '<tool_call>', '<|fim_prefix|>',
];

const EMOJI = [
  '😀', '👍🏽', '🇫🇷', '❤️', '👨‍👩‍👧‍👦', '🧑🏾‍💻', '🏳️‍🌈', '👩‍❤️‍💋‍👨', '🤖', '🎉', '1️⃣', '🫠',
];

function randInt(r, lo, hi) { return lo + Math.floor(r() * (hi - lo + 1)); }
function pick(r, arr) { return arr[Math.floor(r() * arr.length)]; }
function randRange(r, lo, hi, n) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCodePoint(randInt(r, lo, hi));
  return s;
}

function prose(r, nwords) {
  const out = [];
  for (let i = 0; i < nwords; i++) {
    let w = pick(r, WORDS);
    if (i === 0 || r() < 0.08) w = w[0].toUpperCase() + w.slice(1);
    out.push(w);
    if (r() < 0.12) out[out.length - 1] += pick(r, [',', '.', ';', ':', '!', '?', '...', ' -', '"', "'"]);
  }
  return out.join(' ');
}

const SCRIPTS = {
  cjk: [0x4E00, 0x9FA5], hira: [0x3041, 0x3096], kata: [0x30A1, 0x30FA], hangul: [0xAC00, 0xD7A3],
  arabic: [0x0621, 0x064A], hindi: [0x0905, 0x0939], thai: [0x0E01, 0x0E30], cyr: [0x0410, 0x044F],
  greek: [0x0391, 0x03C9], hebrew: [0x05D0, 0x05EA],
};

function scriptText(r, name) {
  const [lo, hi] = SCRIPTS[name];
  const parts = [];
  const n = randInt(r, 1, 6);
  for (let i = 0; i < n; i++) {
    let w = randRange(r, lo, hi, randInt(r, 1, 8));
    if (name === 'hindi' && r() < 0.5) w += pick(r, ['\u093E', '\u093F', '\u0940', '\u094D', '\u0902']);
    if (name === 'thai' && r() < 0.5) w += pick(r, ['\u0E31', '\u0E34', '\u0E48', '\u0E49']);
    if (name === 'arabic' && r() < 0.3) w += '\u064E';
    parts.push(w);
  }
  const sep = name === 'cjk' || name === 'thai' || name === 'hira' || name === 'kata' ? pick(r, ['', '，', '。', ' ']) : ' ';
  return parts.join(sep);
}

function combining(r) {
  let s = '';
  const n = randInt(r, 1, 6);
  for (let i = 0; i < n; i++) {
    s += pick(r, ['a', 'e', 'o', 'u', 'n', 'A', 'Z', 'i']);
    const k = randInt(r, 0, 3);
    for (let j = 0; j < k; j++) s += String.fromCodePoint(randInt(r, 0x0300, 0x036F));
    if (r() < 0.3) s += ' ';
  }
  // precomposed forms, NFC / NFKC sensitive characters
  return s + pick(r, ['', ' é', ' ﬁ', ' Ⅻ', ' ①', ' ｆｕｌｌ', ' Å', ' ℌ', ' ¼']);
}

function numbers(r) {
  return pick(r, [
    () => String(randInt(r, 0, 1e9)),
    () => (r() * 1e6).toFixed(randInt(r, 0, 6)),
    () => `${randInt(r, 1, 31)}/${randInt(r, 1, 12)}/${randInt(r, 1900, 2100)}`,
    () => `+1 (${randInt(r, 100, 999)}) ${randInt(r, 100, 999)}-${randInt(r, 1000, 9999)}`,
    () => '٣٤٥ ४५६ ๑๒๓ ' + randInt(r, 0, 99999),
    () => `v${randInt(r, 0, 9)}.${randInt(r, 0, 99)}.${randInt(r, 0, 999)}`,
    () => '1234567890'.repeat(randInt(r, 1, 5)),
    () => `$${randInt(r, 0, 9999)}.${randInt(r, 10, 99)} and ${randInt(r, 0, 100)}%`,
  ])();
}

function whitespace(r) {
  const bits = [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n ', '\u00A0', '\u3000', '\u2003', '\v', '\f', '\u0085', '\u200B'];
  let s = '';
  const n = randInt(r, 1, 10);
  for (let i = 0; i < n; i++) s += r() < 0.5 ? pick(r, bits) : pick(r, WORDS);
  return s;
}

function mixed(r) {
  const gens = [
    () => prose(r, randInt(r, 1, 30)),
    () => pick(r, CODE),
    () => scriptText(r, pick(r, Object.keys(SCRIPTS))),
    () => pick(r, EMOJI) + (r() < 0.5 ? pick(r, EMOJI) : ''),
    () => combining(r),
    () => numbers(r),
    () => whitespace(r),
    () => pick(r, SPECIALS),
  ];
  let s = '';
  const n = randInt(r, 1, 5);
  for (let i = 0; i < n; i++) s += (i && r() < 0.7 ? pick(r, [' ', '', '\n']) : '') + pick(r, gens)();
  return s;
}

const enc = new TextEncoder();

export function generateCorpus(seed = 12345) {
  const r = mulberry32(seed);
  const out = [];
  const add = (s) => out.push(typeof s === 'string' ? enc.encode(s) : s);
  // fixed edge cases
  for (const s of ['', ' ', '  ', '\n', '\t', 'a', ' a', 'a ', 'Hello world', ' Hello  world ', "I'm here, aren't I?",
    '\u0000', '\u00A0', '\uFEFFbom', '\uFFFD', 'ﬀ ligature', 'İstanbul', 'ΣΊΣΥΦΟΣ', ...SPECIALS,
    SPECIALS.join(''), SPECIALS.join(' '), ' <s> spaced </s> ', '<<s>>', '<|im_start|>user\nhi<|im_end|>\n'])
    add(s);
  // very long words and runs
  add('a'.repeat(3000));
  add('ab'.repeat(1500));
  add(' '.repeat(1000));
  add('\n'.repeat(300));
  add('x'.repeat(200) + ' ' + 'y'.repeat(200));
  add(randRange(r, 0x61, 0x7A, 5000));
  add(randRange(r, 0x4E00, 0x9FA5, 2000));
  add('pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(20));
  add('0'.repeat(1000));
  add('😀'.repeat(500));
  // invalid UTF-8
  for (const bytes of [[0xff], [0xc3], [0xe4, 0xbd], [0xf0, 0x9f, 0x98], [0x80, 0x80], [0xed, 0xa0, 0x80],
    [0xc0, 0xaf], [0xf5, 0x80, 0x80, 0x80], [0x61, 0xff, 0x62], [0xe4, 0xbd, 0x61, 0xa0]])
    add(Uint8Array.from(bytes));
  for (let i = 0; i < 60; i++) {
    const b = enc.encode(mixed(r));
    const arr = Array.from(b);
    const k = randInt(r, 1, 3);
    for (let j = 0; j < k; j++) arr.splice(randInt(r, 0, arr.length), 0, randInt(r, 0x80, 0xff));
    add(Uint8Array.from(arr));
  }
  // categories
  for (let i = 0; i < 900; i++) add(prose(r, randInt(r, 1, 60)));
  for (let i = 0; i < 400; i++) add(pick(r, CODE) + (r() < 0.5 ? pick(r, CODE) : ''));
  for (let i = 0; i < 400; i++) add(whitespace(r));
  for (const name of Object.keys(SCRIPTS)) for (let i = 0; i < 80; i++) add(scriptText(r, name));
  for (let i = 0; i < 250; i++) add(pick(r, EMOJI) + ' ' + prose(r, randInt(r, 0, 5)) + pick(r, EMOJI));
  for (let i = 0; i < 250; i++) add(combining(r));
  for (let i = 0; i < 300; i++) add(numbers(r));
  for (let i = 0; i < 300; i++) add(prose(r, randInt(r, 0, 6)) + pick(r, SPECIALS) + prose(r, randInt(r, 0, 6)));
  while (out.length < 5200) add(mixed(r));
  return out;
}
