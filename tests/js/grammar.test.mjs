// Structured output through real clients against `sglc serve` (run by
// tests/scripts/test_grammar_serve.sh, which starts TinyStories-656K with
// --constrained-json-disable-any-whitespace and sets SGLC_URL).  The
// model knows nothing of JSON: every object below is valid only because
// the grammar engine masks the sampler.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { ChatOpenAI } from '@langchain/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, streamObject } from 'ai';

const baseURL = process.env.SGLC_URL + '/v1';
const apiKey = 'sk-none';
const model = 'tiny';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

// bounded strings, enums and booleans: a weak model cannot run on forever.
// (Not z.string().max(n): JSON Schema's maxLength counts code points and
// the grammar honours that, while zod counts UTF-16 units, so a random
// model's astral characters would fail zod's check of a valid instance.)
const Pet = z.object({
  name: z.string().regex(/^[A-Za-z][a-z ]{0,11}$/),
  color: z.enum(['red', 'green', 'blue']),
  friendly: z.boolean(),
});

test('openai chat.completions.parse with zodResponseFormat', async () => {
  for (const seed of [1, 2]) {
    const r = await client.beta.chat.completions.parse({
      model,
      messages: [{ role: 'user', content: 'Describe a pet.' }],
      response_format: zodResponseFormat(Pet, 'pet'),
      max_tokens: 200,
      seed,
    });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(m.parsed, m.content);
    assert.deepEqual(Pet.parse(m.parsed), m.parsed);
  }
});

test('openai: response_format json_object gives a JSON object', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'JSON please.' }],
    response_format: { type: 'json_object' },
    max_tokens: 60,
    seed: 3,
  });
  const c = r.choices[0];
  if (c.finish_reason === 'stop') assert.equal(typeof JSON.parse(c.message.content), 'object');
  else assert.ok(c.message.content.trimStart().startsWith('{'), c.message.content);
});

const llm = new ChatOpenAI({
  model, apiKey, configuration: { baseURL }, maxTokens: 200, temperature: 1, maxRetries: 0,
});

test('LangChain withStructuredOutput, method jsonSchema (zod)', async () => {
  const s = llm.withStructuredOutput(Pet, { method: 'jsonSchema', name: 'pet' });
  const out = await s.invoke('Describe a pet.');
  assert.deepEqual(Pet.parse(out), out);
});

test('LangChain withStructuredOutput, method jsonMode (JSON schema)', async () => {
  const schema = {
    title: 'pet', type: 'object',
    properties: { name: { type: 'string', maxLength: 12 } }, required: ['name'],
  };
  const short = new ChatOpenAI({
    model, apiKey, configuration: { baseURL }, maxTokens: 60, temperature: 1, maxRetries: 0,
  }); // JSON mode cannot force an end: keep it short
  const s = short.withStructuredOutput(schema, { method: 'jsonMode', includeRaw: true });
  const out = await s.invoke('Describe a pet as JSON.');
  const raw = out.raw.content;
  // JSON mode guarantees JSON, not the keys (the schema is a prompt hint only)
  if (out.raw.response_metadata?.finish_reason === 'stop') assert.equal(typeof JSON.parse(raw), 'object');
  else assert.ok(raw.trimStart().startsWith('{'), raw);
});

const provider = createOpenAICompatible({ name: 'sglc', baseURL, apiKey, supportsStructuredOutputs: true });

test('AI SDK generateObject', async () => {
  const { object, finishReason } = await generateObject({
    model: provider(model), schema: Pet, prompt: 'Describe a pet.', maxOutputTokens: 200, seed: 4,
  });
  assert.equal(finishReason, 'stop');
  assert.deepEqual(Pet.parse(object), object);
});

test('AI SDK streamObject', async () => {
  const r = streamObject({
    model: provider(model), schema: Pet, prompt: 'Describe a pet.', maxOutputTokens: 200, seed: 5,
  });
  let partials = 0;
  for await (const p of r.partialObjectStream) {
    assert.equal(typeof p, 'object');
    partials++;
  }
  const object = await r.object;
  assert.ok(partials >= 1);
  assert.deepEqual(Pet.parse(object), object);
});
