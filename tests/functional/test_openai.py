"""The OpenAI endpoint against the real tritonserver, driven by the official ``openai`` client and curl."""

import asyncio
import json
import shutil
import subprocess
import time
import urllib.request

import openai
import pytest

from pytriton_like.model_config import DynamicBatcher, ModelConfig, QueuePolicy, TimeoutAction
from pytriton_like.openai import bind_chat_model, bind_embedding_model
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, free_port, port_listening, wait_for
from .openai_models import (
    API_KEY, BUSY_RUNNING, ORDERED, SECRET, SLOW, SLOW_PIECES, ask, async_chat, busy, echo_params, embed,
    fail_midway, failing, failing_stream, plain_chat, tiny_chat,
)

@pytest.fixture(scope="module")
def server():
    config = free_config(allow_openai=True, openai_port=free_port(), openai_address="127.0.0.1", openai_api_key=API_KEY)
    with checked_for_leaks(), Triton(config=config) as triton:
        bind_chat_model(triton, "tiny-chat", tiny_chat)
        bind_chat_model(triton, "async-chat", async_chat)
        bind_chat_model(triton, "async-batched", async_chat, config=ModelConfig(
            max_batch_size=4, batcher=DynamicBatcher(max_queue_delay_microseconds=20_000)))
        bind_chat_model(triton, "plain-chat", plain_chat)
        bind_chat_model(triton, "echo-params", echo_params)
        bind_chat_model(triton, "slow-chat", SLOW)
        bind_chat_model(triton, "failing", failing)
        bind_chat_model(triton, "fail-midway", fail_midway)
        bind_chat_model(triton, "failing-stream", failing_stream)
        queue = QueuePolicy(max_queue_size=1, default_timeout_microseconds=300_000, timeout_action=TimeoutAction.REJECT)
        bind_chat_model(triton, "busy", busy, config=ModelConfig(
            max_batch_size=1, batcher=DynamicBatcher(default_queue_policy=queue)))
        for name, function in (("prioritised", tiny_chat), ("ordered", ORDERED)):
            bind_chat_model(triton, name, function, config=ModelConfig(
                max_batch_size=1, batcher=DynamicBatcher(priority_levels=2, default_priority_level=2)))
        bind_embedding_model(triton, "tiny-embed", embed, config=ModelConfig(max_batch_size=4))
        triton.run()
        yield config
    assert not port_listening(config.openai_port)


@pytest.fixture
def base_url(server):
    return f"http://127.0.0.1:{server.openai_port}/v1"


@pytest.fixture
def client(base_url):
    with openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
        yield client



# -- models ----------------------------------------------------------------------------------------


def test_lists_the_bound_models(client):
    names = [model.id for model in client.models.list()]
    assert names == sorted(["tiny-chat", "async-chat", "plain-chat", "slow-chat", "failing", "fail-midway", "busy",
                            "prioritised", "tiny-embed", "echo-params", "async-batched", "failing-stream",
                            "ordered"])
    assert client.models.retrieve("tiny-chat").owned_by == "pytriton_like"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


# -- chat ------------------------------------------------------------------------------------------


def test_chat_answer(client):
    answer = client.chat.completions.create(model="tiny-chat", messages=ask("hello there"))
    assert answer.id.startswith("chatcmpl-") and answer.object == "chat.completion"
    assert answer.model == "tiny-chat" and abs(answer.created - time.time()) < 60
    (choice,) = answer.choices
    assert choice.index == 0 and choice.finish_reason == "stop"
    assert choice.message.role == "assistant" and choice.message.content == "You said: hello there (choice 0)"
    # no counts reported: the words (prompt: both messages' contents)
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (4, 6, 10)


def test_a_streamed_answer_joined_equals_the_whole_one(client):
    whole = client.chat.completions.create(model="tiny-chat", messages=ask("stream me"))
    chunks = list(client.chat.completions.create(
        model="tiny-chat", messages=ask("stream me"), stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({chunk.id for chunk in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == whole.choices[0].message.content
    assert len([chunk for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]) == 6  # a chunk a piece
    finish = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason]
    assert finish == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_without_include_usage_a_stream_has_no_usage(client):
    chunks = list(client.chat.completions.create(model="tiny-chat", messages=ask("x"), stream=True))
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


def test_max_tokens_ends_with_length(client):
    answer = client.chat.completions.create(model="tiny-chat", messages=ask("a long question"), max_tokens=3)
    assert answer.choices[0].message.content == "You said: a"
    assert answer.choices[0].finish_reason == "length" and answer.usage.completion_tokens == 3
    chunks = list(client.chat.completions.create(
        model="tiny-chat", messages=ask("a long question"), max_completion_tokens=3, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"


def test_n_choices_each_a_request(client):
    answer = client.chat.completions.create(model="tiny-chat", messages=ask("hi"), n=3)
    assert [(c.index, c.message.content) for c in answer.choices] == [
        (index, f"You said: hi (choice {index})") for index in range(3)]
    assert answer.usage.prompt_tokens == 3 and answer.usage.completion_tokens == 15
    chunks = list(client.chat.completions.create(model="tiny-chat", messages=ask("hi"), n=3, stream=True))
    texts = {index: "" for index in range(3)}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == {c.index: c.message.content for c in answer.choices}


def test_a_plain_callable_answers_and_reports_its_tokens(client):
    answer = client.chat.completions.create(model="plain-chat", messages=ask("hi"))
    assert answer.choices[0].message.content == "You said: hi (choice 0)"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 7)
    chunks = list(client.chat.completions.create(
        model="plain-chat", messages=ask("hi"), stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: hi (choice 0)"
    assert chunks[-1].usage.completion_tokens == 7


def test_sampling_parameters_and_extra_fields_reach_the_callable(client):
    answer = client.chat.completions.create(
        model="echo-params", messages=ask("hi"), temperature=0.5, top_p=0.9, stop=["\n"], seed=7, max_tokens=9,
        user="u1", presence_penalty=0.1, extra_body={"custom": [1, 2]})
    assert json.loads(answer.choices[0].message.content) == {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], "prompt": None,
        "max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "stop": ["\n"], "seed": 7, "n": 1, "choice": 0,
        "extra": {"user": "u1", "presence_penalty": 0.1, "custom": [1, 2]},
    }


def test_priority_is_handed_to_triton(client):
    answer = client.chat.completions.create(model="prioritised", messages=ask("hi"), extra_body={"priority": 1})
    assert answer.choices[0].message.content == "You said: hi (choice 0)"


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_with_a_higher_priority_overtakes_the_queue(base_url, stream):
    # "ordered" (a plain callable) runs one request at a time; while "block" runs, "low" (the
    # default priority, 2) and then "high" (priority 1) wait in its queue: Triton starts "high" first
    async def main():
        async with openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
            async def call(text, priority=None):
                extra = {} if priority is None else {"priority": priority}
                answer = await client.chat.completions.create(
                    model="ordered", messages=ask(text), stream=stream, extra_body=extra)
                if stream:
                    return "".join([chunk.choices[0].delta.content or "" async for chunk in answer])
                return answer.choices[0].message.content

            ORDERED.blocking.clear()
            blocker = asyncio.ensure_future(call("block"))
            assert await asyncio.get_running_loop().run_in_executor(None, ORDERED.blocking.wait, 30)
            low = asyncio.ensure_future(call("low"))
            await asyncio.sleep(0.1)
            high = asyncio.ensure_future(call("high", priority=1))
            return await asyncio.gather(blocker, low, high)

    ORDERED.order.clear()
    assert asyncio.run(main()) == ["block", "low", "high"]
    assert ORDERED.order == ["block", "high", "low"]


def test_async_client_streams_and_answers(base_url):
    async def main():
        async with openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
            whole = await client.chat.completions.create(model="async-chat", messages=ask("async"))
            stream = await client.chat.completions.create(model="async-chat", messages=ask("async"), stream=True)
            text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
            several = await asyncio.gather(*(
                client.chat.completions.create(model="tiny-chat", messages=ask(f"q{i}")) for i in range(8)))
            # requests that the batcher puts in one batch still stream each its own answer
            batched = await asyncio.gather(*(
                client.chat.completions.create(model="async-batched", messages=ask(" ".join(["w"] * i)))
                for i in (1, 9, 3, 5)))  # answers of different lengths
            models = [model.id async for model in client.models.list()]
            vectors = await client.embeddings.create(model="tiny-embed", input="a b")
            return whole, text, several, models, vectors, batched

    whole, text, several, models, vectors, batched = asyncio.run(main())
    assert [a.choices[0].message.content for a in batched] == [
        f"You said: {' '.join(['w'] * i)} (choice 0) " for i in (1, 9, 3, 5)]
    assert whole.choices[0].message.content == "You said: async (choice 0) " == text
    assert [a.choices[0].message.content for a in several] == [f"You said: q{i} (choice 0)" for i in range(8)]
    assert "async-chat" in models and vectors.data[0].embedding == [3.0, 1.0, 1.5]


# -- completions -----------------------------------------------------------------------------------


def test_completions_whole_and_streamed(client):
    whole = client.completions.create(model="tiny-chat", prompt="once upon")
    assert whole.object == "text_completion" and whole.id.startswith("cmpl-")
    assert whole.choices[0].text == "You said: once upon (choice 0)" and whole.choices[0].finish_reason == "stop"
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (2, 6)
    chunks = list(client.completions.create(
        model="tiny-chat", prompt="once upon", stream=True, stream_options={"include_usage": True}))
    assert "".join(chunk.choices[0].text for chunk in chunks if chunk.choices) == whole.choices[0].text
    assert chunks[-1].usage == whole.usage


def test_completions_of_several_prompts(client):
    answer = client.completions.create(model="tiny-chat", prompt=["a", "b"], n=2)
    assert [(c.index, c.text) for c in answer.choices] == [
        (0, "You said: a (choice 0)"), (1, "You said: a (choice 1)"),
        (2, "You said: b (choice 0)"), (3, "You said: b (choice 1)")]


# -- embeddings ------------------------------------------------------------------------------------


def test_embeddings_as_floats_and_base64(client):
    texts = [f"text number {i}" for i in range(6)]  # more than the model's max_batch_size (4): two requests
    default = client.embeddings.create(model="tiny-embed", input=texts)  # the client asks for base64
    floats = client.embeddings.create(model="tiny-embed", input=texts, encoding_format="float")
    expected = embed(texts).tolist()
    assert [item.embedding for item in default.data] == expected == [item.embedding for item in floats.data]
    assert [item.index for item in floats.data] == list(range(6))
    assert floats.usage.prompt_tokens == 18 and floats.model == "tiny-embed"


# -- errors ----------------------------------------------------------------------------------------


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nope", messages=ask("x"))
    assert info.value.status_code == 404 and info.value.code == "model_not_found" and info.value.param == "model"
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="nope", input="x")


@pytest.mark.parametrize("fields, param", [
    ({"temperature": 5}, "temperature"),
    ({"n": 0}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
    ({"logprobs": True}, "logprobs"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "messages[0].content[0].type"),
    ({"messages": []}, "messages"),
    ({"model": "tiny-embed"}, "model"),
])
def test_a_malformed_or_unsupported_request_is_400_naming_the_field(client, fields, param):
    arguments = {"model": "tiny-chat", "messages": ask("x"), **fields}
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(**arguments)
    assert info.value.status_code == 400 and info.value.param == param, info.value.body


def test_a_callable_exception_is_500_without_internals(client, caplog):
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="failing", messages=ask("x"))
    assert info.value.status_code == 500 and "failing" in info.value.message
    assert SECRET not in json.dumps(info.value.body) and "ValueError" not in json.dumps(info.value.body)
    with pytest.raises(openai.InternalServerError):
        list(client.chat.completions.create(model="failing", messages=ask("x"), stream=True))


@pytest.mark.parametrize("stream", [False, True])
def test_a_streaming_callable_failing_before_its_first_piece_is_500_without_internals(client, stream):
    with pytest.raises(openai.InternalServerError) as info:
        answer = client.chat.completions.create(model="failing-stream", messages=ask("x"), stream=stream)
        if stream:
            list(answer)
    assert info.value.status_code == 500 and "failing-stream" in info.value.message
    assert SECRET not in json.dumps(info.value.body) and "ValueError" not in json.dumps(info.value.body)


def test_a_failure_midway_ends_the_stream_with_an_error_event(client):
    chunks = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(model="fail-midway", messages=ask("x"), stream=True):
            chunks.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "one two "
    assert SECRET not in str(info.value)


def calls_while_busy(base_url, model, others):
    """The outcomes of a request to ``model`` and, while it runs, of ``others`` more at once."""
    async def main():
        async with openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
            def call():
                return client.chat.completions.create(model=model, messages=ask("x"))

            running = asyncio.ensure_future(call())
            assert await asyncio.get_running_loop().run_in_executor(None, BUSY_RUNNING.wait, 30)
            answers = await asyncio.gather(*(call() for _ in range(others)), return_exceptions=True)
            return [await running, *answers]

    return asyncio.run(main())


def test_a_full_queue_is_429_and_a_queue_timeout_503(base_url):
    # "busy" runs one request at a time for 1 s; its queue holds one request for at most 0.3 s
    outcomes = calls_while_busy(base_url, "busy", 3)
    kinds = sorted(type(outcome).__name__ for outcome in outcomes)
    assert kinds == ["ChatCompletion", "InternalServerError", "RateLimitError", "RateLimitError"], outcomes
    limited = next(o for o in outcomes if isinstance(o, openai.RateLimitError))
    timed_out = next(o for o in outcomes if isinstance(o, openai.InternalServerError))
    assert limited.status_code == 429 and limited.code == "queue_full"
    assert timed_out.status_code == 503 and timed_out.code == "timeout"


def test_the_api_key_is_required(base_url):
    with openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as info:
            client.models.list()
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
    request = urllib.request.Request(f"{base_url}/models")
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=10)
    assert raw.value.code == 401 and json.load(raw.value)["error"]["type"] == "invalid_request_error"


def test_a_body_that_is_not_json_is_400(base_url):
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=b"{not json", headers={"Authorization": f"Bearer {API_KEY}"})
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=10)
    body = json.load(raw.value)
    assert raw.value.code == 400 and set(body["error"]) == {"message", "type", "param", "code"}


def test_a_client_that_goes_away_cancels_the_generation(client):
    SLOW.closed.clear()
    stream = client.chat.completions.create(model="slow-chat", messages=ask("x"), stream=True)
    for _ in range(4):
        next(stream)  # the role, then pieces
    stream.close()
    assert SLOW.closed.wait(10), "the callable was not stopped"
    asked = SLOW.asked
    time.sleep(0.3)
    assert SLOW.asked == asked < SLOW_PIECES


def test_health_follows_triton(base_url):
    with urllib.request.urlopen(base_url.replace("/v1", "/health"), timeout=10) as answer:
        assert answer.status == 200 and json.load(answer) == {"status": "ready"}


def test_the_requests_go_through_triton(client, server):
    def successes():
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            if line.startswith("nv_inference_request_success{") and 'model="tiny-embed"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    before = successes()
    client.embeddings.create(model="tiny-embed", input=["a", "b"])
    assert wait_for(lambda: successes() == before + 1, timeout_s=10)  # one Triton request of 2 texts


# -- the raw event stream --------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (make test installs it)")
def test_curl_sees_server_sent_events_ending_with_done(base_url):
    body = json.dumps({"model": "tiny-chat", "messages": ask("curl"), "stream": True})
    completed = subprocess.run(
        ["curl", "-sSN", "-D", "-", "-H", f"Authorization: Bearer {API_KEY}", "-H", "Content-Type: application/json",
         "-d", body, f"{base_url}/chat/completions"],
        capture_output=True, timeout=60, check=True,
    )
    head, _, events = completed.stdout.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200") and "Content-Type: text/event-stream" in head
    blocks = events.split("\n\n")
    assert blocks[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(block[len("data: "):]) for block in blocks[:-2]]
    assert all(block.startswith("data: ") for block in blocks[:-1])
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "You said: curl (choice 0)"
