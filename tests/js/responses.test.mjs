// The Responses API through the official OpenAI client (run by
// tests/scripts/test_server.sh, which starts the server and sets SGLC_URL
// / SGLC_API_KEY).  Reference: the same conversation through
// /v1/chat/completions, greedy — a Response must carry exactly the chat
// route's text, whole and streamed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.SGLC_URL + '/v1', apiKey: process.env.SGLC_API_KEY,
                            maxRetries: 0, timeout: 60000 });
const model = 'tiny';

async function chatText(messages, max_tokens) {
  const r = await client.chat.completions.create({ model, messages, max_tokens, temperature: 0 });
  return r.choices[0].message.content;
}

test('responses.create = chat completion of the same conversation', async () => {
  const r = await client.responses.create({ model, instructions: 'Tell a story.', input: 'Once upon a time',
                                            max_output_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.equal(r.usage.output_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + 8);
  const want = await chatText([{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'Once upon a time' }], 8);
  assert.equal(r.output_text, want);
  assert.equal(r.instructions, 'Tell a story.');
  assert.equal(r.max_output_tokens, 8);
});

test('streamed events add up to the whole response', async () => {
  const body = { model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'The cat' }] }],
                 max_output_tokens: 10, temperature: 0 };
  const whole = await client.responses.create(body);
  const stream = await client.responses.create({ ...body, stream: true });
  const types = [];
  let text = '', last = null, seq = -1;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') last = ev.response;
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
                                       'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
                                     'response.output_item.done', 'response.incomplete']);
  assert.equal(text, whole.output_text);
  assert.equal(last.output[0].content[0].text, whole.output_text);
  assert.equal(last.usage.output_tokens, 10);
});

test('stored responses: retrieve, input_items, previous_response_id, delete', async () => {
  const r = await client.responses.create({ model, input: 'Lily had a ball.', max_output_tokens: 6, temperature: 0 });
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output[0].content[0].text, r.output_text); // the SDK adds output_text on create only
  const items = await client.responses.inputItems.list(r.id);
  assert.equal(items.data.length, 1);
  assert.equal(items.data[0].content[0].text, 'Lily had a ball.');
  const next = await client.responses.create({ model, input: 'What next?', previous_response_id: r.id,
                                               max_output_tokens: 6, temperature: 0 });
  const want = await chatText([{ role: 'user', content: 'Lily had a ball.' }, { role: 'assistant', content: r.output_text },
                               { role: 'user', content: 'What next?' }], 6);
  assert.equal(next.output_text, want);
  await client.responses.del(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404 && /not found/.test(e.message));
  const unstored = await client.responses.create({ model, input: 'x', max_output_tokens: 2, store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
});

test('function_call history items render; bad requests are readable errors', async () => {
  const r = await client.responses.create({
    model, max_output_tokens: 4, temperature: 0,
    input: [{ role: 'user', content: 'Weather?' },
            { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
            { type: 'function_call_output', call_id: 'call_1', output: 'sunny' }],
  });
  assert.equal(r.usage.output_tokens, 4);
  await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_nope' }),
                       (e) => e.status === 404 && /resp_nope/.test(e.message));
  await assert.rejects(client.responses.create({ model, input: 'x', background: true }),
                       (e) => e.status === 400 && /background/.test(e.message));
  await assert.rejects(client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x' }] }] }),
                       (e) => e.status === 400 && /input_image/.test(e.message));
  await assert.rejects(client.responses.create({ model, input: 'x', tools: [{ type: 'web_search_preview' }] }),
                       (e) => e.status === 400 && /web_search_preview/.test(e.message));
});
