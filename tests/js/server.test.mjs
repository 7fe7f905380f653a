// OpenAI-client test of `sglc serve` (run by tests/scripts/test_server.sh,
// which starts the server and sets SGLC_URL / SGLC_API_KEY / SGLC_CHAT).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.SGLC_URL + '/v1';
const apiKey = process.env.SGLC_API_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const model = 'tiny';

test('models list and retrieve', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, model);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  await assert.rejects(client.models.retrieve('nope'), (e) => e.status === 404);
});

test('completion, greedy, max_tokens, usage', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.choices[0].text.length > 0);
  // deterministic under greedy
  const r2 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r2.choices[0].text, r.choices[0].text);
});

test('completion streaming equals non-streaming', async () => {
  const full = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(chunks >= 2);
  assert.equal(text, full.choices[0].text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 10);
});

test('n > 1 with sampling gives n choices', async () => {
  const r = await client.completions.create({ model, prompt: 'The dog', max_tokens: 6, n: 3, temperature: 1.0, seed: 1 });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.ok(r.usage.completion_tokens >= 3 && r.usage.completion_tokens <= 18);
});

test('stop string trims the text', async () => {
  const full = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  const t = full.choices[0].text;
  // pick a word from the middle of the greedy continuation as the stop
  const words = t.trim().split(/\s+/);
  assert.ok(words.length >= 4, t);
  const stop = words[3];
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, t.slice(0, t.indexOf(stop)));
});

test('logprobs', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(lp.top_logprobs.length, 4);
  for (const v of lp.token_logprobs) assert.ok(v <= 0);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
});

test('echo and streaming logprobs', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 3, temperature: 0, echo: true });
  assert.ok(r.choices[0].text.startsWith('Once upon a time'));
  const s = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 3, temperature: 0, echo: true, stream: true, logprobs: 1 });
  let text = '', n = 0;
  for await (const c of s) {
    text += c.choices[0]?.text ?? '';
    n += c.choices[0]?.logprobs?.tokens?.length ?? 0;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(n, 3);
});

test('errors: bad params -> 400, wrong key -> 401', async () => {
  await assert.rejects(client.completions.create({ model, prompt: 'x', temperature: -1 }), (e) => e.status === 400);
  await assert.rejects(client.completions.create({ model, prompt: 'x', top_p: 2 }), (e) => e.status === 400);
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model, prompt: 'x', max_tokens: 1 }), (e) => e.status === 401);
});

test('chat completions (streaming and not)', { skip: !process.env.SGLC_CHAT && 'no chat template' }, async () => {
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell a story.' }];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.usage.completion_tokens, 6);
  const s = await client.chat.completions.create({ model, messages, max_completion_tokens: 6, temperature: 0, stream: true });
  let text = '', role = null;
  for await (const c of s) {
    const d = c.choices[0]?.delta;
    if (d?.role) role = d.role;
    if (d?.content) text += d.content;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, r.choices[0].message.content);
  const l = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
  assert.equal(l.choices[0].logprobs.content.length, 3);
  assert.equal(l.choices[0].logprobs.content[0].top_logprobs.length, 2);
  const ls = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0, logprobs: true, stream: true });
  const got = [];
  for await (const c of ls) for (const e of c.choices[0]?.logprobs?.content ?? []) got.push(e.logprob);
  assert.deepEqual(got, l.choices[0].logprobs.content.map((e) => e.logprob));
});

// Errors: every /v1 error carries OpenAI's error object, so the SDK shows
// the server's message (not "400 status code (no body)").
test('errors surface the real message and status', async () => {
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 2, logprobs: 99 }),
    (e) => e.status === 400 && e.message.includes('logprobs must be between 0 and 20'));
  await assert.rejects(client.models.retrieve('nope'),
    (e) => e.status === 404 && e.message.includes("The model 'nope' does not exist") && e.code === 'model_not_found');
  await assert.rejects(client.get('/no_such_route'), (e) => e.status === 404 && e.message.includes('Not Found'));
  // the server runs with --max-payload-size 100000: src/http answers 413 before routing
  await assert.rejects(client.completions.create({ model, prompt: 'a '.repeat(60000), max_tokens: 1 }),
    (e) => e.status === 413 && e.message.includes('Request body too large'));
  if (apiKey) {
    const bad = new OpenAI({ baseURL, apiKey: apiKey + 'x', maxRetries: 0, timeout: 60000 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401 && e.message.includes('Unauthorized'));
  }
});
