#!/usr/bin/env python3
"""Call tiny-chat and tiny-embed with the official openai package: list, chat (whole and streamed), embed."""

import argparse
import asyncio
import os

import openai


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://localhost:9000/v1", help="the OpenAI endpoint's base URL")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    args = parser.parse_args()
    tag = f"[{args.url}]"
    with openai.OpenAI(base_url=args.url, api_key=args.api_key) as client:
        print(tag, "models:", ", ".join(model.id for model in client.models.list()))

        messages = [{"role": "user", "content": "dragons"}]
        answer = client.chat.completions.create(model="tiny-chat", messages=messages)
        print(tag, "answer:", answer.choices[0].message.content)
        print(tag, "finish_reason:", answer.choices[0].finish_reason, "usage:", answer.usage.model_dump(exclude_none=True))

        print(f"{tag} streamed: ", end="", flush=True)
        stream = client.chat.completions.create(model="tiny-chat", messages=messages, stream=True,
                                                stream_options={"include_usage": True})
        pieces = []
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
                print(chunk.choices[0].delta.content, end="", flush=True)
            if chunk.usage:
                print(f"\n{tag} streamed usage: {chunk.usage.model_dump(exclude_none=True)}")
        print(tag, "streamed equals whole:", "".join(pieces) == answer.choices[0].message.content)

        short = client.completions.create(model="tiny-chat", prompt="castles", max_tokens=3)
        print(tag, "completion:", repr(short.choices[0].text), "finish_reason:", short.choices[0].finish_reason)

        vectors = client.embeddings.create(model="tiny-embed", input=["Hello world", "Triton"])
        print(tag, "embeddings:", [item.embedding for item in vectors.data])

        try:
            client.chat.completions.create(model="no-such-model", messages=messages)
        except openai.NotFoundError as error:
            print(tag, "unknown model:", error.status_code, error.code)

    async def concurrently():
        async with openai.AsyncOpenAI(base_url=args.url, api_key=args.api_key) as client:
            calls = [client.chat.completions.create(model="tiny-chat", messages=[{"role": "user", "content": f"q{i}"}])
                     for i in range(4)]
            return [answer.choices[0].message.content for answer in await asyncio.gather(*calls)]

    print(tag, "async, 4 at once:", asyncio.run(concurrently()))


if __name__ == "__main__":
    main()
