// OpenAI-client test of `sglc serve --is-embedding` (run by
// tests/scripts/test_embed.sh, which starts the server on TinyStories-656K
// and sets SGLC_URL).  The client asks for base64 by default and decodes
// it itself; float answers are compared with those.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.SGLC_URL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
const model = 'tiny';

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const close = (a, b, tol) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tol);

// base64 of little-endian float32 -> numbers (what the client does)
function decode(b64) {
  const buf = Buffer.from(b64, 'base64');
  const out = [];
  for (let i = 0; i < buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

test('string input, float encoding: one normalized vector, usage', async () => {
  const r = await client.embeddings.create({ model, input: 'Once upon a time', encoding_format: 'float' });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].object, 'embedding');
  assert.equal(r.data[0].index, 0);
  assert.equal(r.data[0].embedding.length, 128);
  assert.ok(Math.abs(norm(r.data[0].embedding) - 1) < 1e-5);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
});

test('list input: one vector per string, in order; same text = same vector', async () => {
  const input = ['Once upon a time', 'The cat sat on the mat.', 'Once upon a time'];
  const r = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.deepEqual(r.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(close(r.data[0].embedding, r.data[2].embedding, 1e-6));
  assert.ok(!close(r.data[0].embedding, r.data[1].embedding, 1e-3));
  const one = await client.embeddings.create({ model, input: input[1], encoding_format: 'float' });
  assert.ok(close(one.data[0].embedding, r.data[1].embedding, 1e-6));
});

test('base64 (the client default) decodes to the float answer', async () => {
  const input = ['a little dog', 'a big red ball'];
  const f = await client.embeddings.create({ model, input, encoding_format: 'float' });
  // default: the client requests base64 and decodes it to numbers
  const d = await client.embeddings.create({ model, input });
  // explicit base64: the raw string comes back
  const b = await client.embeddings.create({ model, input, encoding_format: 'base64' });
  for (let i = 0; i < input.length; i++) {
    assert.equal(typeof b.data[i].embedding, 'string');
    const dec = decode(b.data[i].embedding);
    assert.ok(close(dec, f.data[i].embedding, 1e-7), 'base64 == float');
    assert.ok(close(d.data[i].embedding, f.data[i].embedding, 1e-7), 'client-decoded == float');
  }
});

test('token id inputs', async () => {
  const r = await client.embeddings.create({ model, input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
  assert.equal(r.data.length, 2);
  assert.equal(r.usage.prompt_tokens, 5);
  const one = await client.embeddings.create({ model, input: [4, 5], encoding_format: 'float' });
  assert.ok(close(one.data[0].embedding, r.data[1].embedding, 1e-6));
});

test('errors: dimensions on a non-Matryoshka model, empty input, generation', async () => {
  // SGLang's error body ({"object": "error", "message", ...}) has no "error"
  // key, so the client keeps only the status
  await assert.rejects(client.embeddings.create({ model, input: 'hi', dimensions: 8 }), (e) => e.status === 400);
  await assert.rejects(client.embeddings.create({ model, input: '' }), (e) => e.status === 400);
  await assert.rejects(client.completions.create({ model, prompt: 'hi', max_tokens: 2 }), (e) => e.status === 400);
});
