// Tool calling through real clients (run by tests/scripts/test_tools_serve.sh,
// which serves a random-weight Qwen3 with its real tokenizer and template,
// --tool-call-parser qwen, and sets SGLC_URL): the official OpenAI SDK
// (`tools`, a tool history, `runTools` whole and streamed), LangChain JS
// (`bindTools`, a ToolMessage history) and the Vercel AI SDK
// (@ai-sdk/openai-compatible `generateText` / `streamText` with tools).
// With tool_choice required / named the server constrains the output to a
// call (SGLang's JSON-array schema), so even random weights give a valid
// call; while the serving path has no grammar engine those requests are a
// 400 naming it, and the tests that need them are skipped (not passed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ChatOpenAI } from '@langchain/openai';
import { tool as lcTool } from '@langchain/core/tools';
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { generateText, streamText, tool as aiTool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const baseURL = process.env.SGLC_URL + '/v1';
const apiKey = process.env.SGLC_API_KEY || 'none';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const model = 'tiny';
const timeParams = { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] };
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: timeParams } },
];
const history = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
    function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '22C and sunny' },
];

// Does this server constrain tool_choice required (grammar in the serving path)?
let grammar = null;
async function hasGrammar() {
  if (grammar !== null) return grammar;
  try {
    await client.chat.completions.create({ model, messages: history, tools, tool_choice: 'required', max_tokens: 64 });
    grammar = true;
  } catch (e) {
    if (e.status === 400 && /grammar/.test(e.message)) grammar = false;
    else throw e;
  }
  return grammar;
}

test('openai: tools and a tool-call history (content null, tool message) are served', async () => {
  const r = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 8, temperature: 0 });
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  assert.ok(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason));
  if (m.tool_calls) for (const c of m.tool_calls) JSON.parse(c.function.arguments);
  const none = await client.chat.completions.create({ model, messages: history, tools, tool_choice: 'none',
                                                      max_tokens: 4, temperature: 0 });
  assert.equal(none.choices[0].message.tool_calls ?? null, null);
});

test('openai: an unknown named tool is a 400 with the message', async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: history, tools,
    tool_choice: { type: 'function', function: { name: 'nope' } } }),
    (e) => e.status === 400 && /nope/.test(e.message));
});

for (const stream of [false, true]) {
  test(`openai: runTools with a named tool calls it once with valid arguments (${stream ? 'streamed' : 'whole'})`, async (t) => {
    if (!(await hasGrammar())) return t.skip('no grammar engine in the serving path yet: tool_choice named is refused');
    const called = [];
    const runner = client.beta.chat.completions.runTools({
      model, messages: [{ role: 'user', content: 'What time is it in Tokyo?' }], max_tokens: 128, temperature: 0, stream,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      tools: [{ type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: timeParams,
        parse: JSON.parse, function: (args) => { called.push(args); return '12:00'; } } }],
    });
    await runner.done();
    assert.equal(called.length, 1);
    assert.equal(typeof called[0], 'object');
    const msgs = runner.messages;
    const call = msgs.find((m) => m.role === 'assistant' && m.tool_calls?.length);
    assert.equal(call.tool_calls[0].function.name, 'get_time');
    assert.match(call.tool_calls[0].id, /^call_/);
  });
}

test('openai: tool_choice required returns a valid call (finish_reason tool_calls)', async (t) => {
  if (!(await hasGrammar())) return t.skip('no grammar engine in the serving path yet: tool_choice required is refused');
  const r = await client.chat.completions.create({ model, messages: history, tools, tool_choice: 'required',
                                                   max_tokens: 128, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  for (const c of r.choices[0].message.tool_calls) {
    assert.ok(['get_weather', 'get_time'].includes(c.function.name));
    assert.equal(c.type, 'function');
    JSON.parse(c.function.arguments);
  }
});

// The Responses API with tools: flat function tools, a forced call comes
// back as a function_call output item (whole and streamed), and the stored
// response's call feeds the next turn through previous_response_id.
const respTools = tools.map((t) => ({ type: 'function', ...t.function }));
test('openai: responses.create with a named tool gives a function_call item, whole and streamed', async (t) => {
  if (!(await hasGrammar())) return t.skip('no grammar engine in the serving path yet');
  /* parallel_tool_calls false: exactly one call whatever the random model
   * draws (with parallel calls allowed, how many it writes depends on
   * near-tied logits, and one run under load drew four) */
  const body = { model, input: 'Time in Paris?', tools: respTools, tool_choice: { type: 'function', name: 'get_time' },
                 parallel_tool_calls: false, max_output_tokens: 96, temperature: 0 };
  const r = await client.responses.create(body);
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_time');
  assert.equal(typeof JSON.parse(calls[0].arguments).tz, 'string');
  assert.match(calls[0].call_id, /^call_/);
  const stream = await client.responses.create({ ...body, stream: true });
  let args = '', added = null, done = null, final = null;
  for await (const ev of stream) {
    if (ev.type === 'response.output_item.added' && ev.item.type === 'function_call') added = ev.item;
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.function_call_arguments.done') done = ev.arguments;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assert.equal(added.name, 'get_time');
  assert.equal(args, done);
  assert.equal(done, calls[0].arguments); /* greedy: the same call as the whole answer */
  assert.equal(final.output.filter((o) => o.type === 'function_call')[0].arguments, done);
  const next = await client.responses.create({ model, previous_response_id: r.id, tools: respTools, max_output_tokens: 4,
                                               input: [{ type: 'function_call_output', call_id: calls[0].call_id, output: '12:00' }] });
  assert.equal(next.usage.output_tokens > 0, true);
});

const lcGetTime = lcTool(async ({ tz }) => `12:00 ${tz}`, { name: 'get_time', description: 'Time in a zone',
                                                            schema: z.object({ tz: z.string() }) });
const lc = () => new ChatOpenAI({ model, apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 16, maxRetries: 0 });

test('langchain: bindTools with a ToolMessage history is served', async () => {
  const m = lc().bindTools([lcGetTime]);
  const r = await m.invoke([new HumanMessage('Time in Tokyo?'),
    new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'get_time', args: { tz: 'JST' } }] }),
    new ToolMessage({ tool_call_id: 'call_1', content: '12:00' })]);
  assert.ok(Array.isArray(r.tool_calls));
});

test('langchain: bindTools with a forced tool gives a tool call', async (t) => {
  if (!(await hasGrammar())) return t.skip('no grammar engine in the serving path yet');
  const m = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 128, maxRetries: 0 })
    .bindTools([lcGetTime], { tool_choice: 'get_time' });
  const r = await m.invoke('Time in Tokyo?');
  assert.equal(r.tool_calls.length >= 1, true);
  assert.equal(r.tool_calls[0].name, 'get_time');
  assert.equal(typeof r.tool_calls[0].args, 'object');
});

const provider = createOpenAICompatible({ name: 'sglc', baseURL, apiKey });
const aiTools = { get_time: aiTool({ description: 'Time in a zone', inputSchema: z.object({ tz: z.string() }),
                                     execute: async ({ tz }) => `12:00 ${tz}` }) };

test('ai sdk: generateText with tools (auto) is served', async () => {
  const r = await generateText({ model: provider.chatModel(model), tools: aiTools, prompt: 'Time in Tokyo?',
                                 maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
  assert.ok(Array.isArray(r.toolCalls));
});

for (const stream of [false, true]) {
  test(`ai sdk: a required tool is called (${stream ? 'streamText' : 'generateText'})`, async (t) => {
    if (!(await hasGrammar())) return t.skip('no grammar engine in the serving path yet');
    const args = { model: provider.chatModel(model), tools: aiTools, toolChoice: { type: 'tool', toolName: 'get_time' },
                   prompt: 'Time in Tokyo?', maxOutputTokens: 128, temperature: 0, maxRetries: 0 };
    const r = stream ? streamText(args) : await generateText(args);
    const calls = await r.toolCalls;
    assert.ok(calls.length >= 1);
    assert.equal(calls[0].toolName, 'get_time');
    assert.equal(typeof calls[0].input, 'object');
    const results = await r.toolResults;
    assert.match(String(results[0].output), /^12:00/);
  });
}
