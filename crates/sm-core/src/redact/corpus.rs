//! Real launch commands, as the engines' documentation gives them, with the exact redaction
//! expected: the secret replaced where it stands and every other character kept.

use super::redact_command;

/// `(command, redacted)`. A command that holds no secret must come back unchanged.
const CORPUS: &[(&str, &str)] = &[
    // vLLM, OpenAI-compatible server quickstart
    (
        "vllm serve NousResearch/Meta-Llama-3-8B-Instruct --dtype auto --api-key token-abc123",
        "vllm serve NousResearch/Meta-Llama-3-8B-Instruct --dtype auto --api-key <redacted>",
    ),
    // vLLM with a Mistral model: the flags that mention tokens or keys are not secrets
    (
        "vllm serve mistralai/Mistral-Small-3.1-24B-Instruct-2503 --tokenizer-mode mistral --config-format mistral \
         --load-format mistral --tool-call-parser mistral --enable-auto-tool-choice --max-num-batched-tokens 2048 \
         --kv-cache-dtype fp8 --api-key sk-mistral-9f8e",
        "vllm serve mistralai/Mistral-Small-3.1-24B-Instruct-2503 --tokenizer-mode mistral --config-format mistral \
         --load-format mistral --tool-call-parser mistral --enable-auto-tool-choice --max-num-batched-tokens 2048 \
         --kv-cache-dtype fp8 --api-key <redacted>",
    ),
    // vLLM's Docker page: the token is a shell variable there (not the secret), a value here
    (
        "docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface \
         --env \"HUGGING_FACE_HUB_TOKEN=$HF_TOKEN\" -p 8000:8000 --ipc=host vllm/vllm-openai:latest \
         --model mistralai/Mistral-7B-v0.1",
        "docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface \
         --env \"HUGGING_FACE_HUB_TOKEN=$HF_TOKEN\" -p 8000:8000 --ipc=host vllm/vllm-openai:latest \
         --model mistralai/Mistral-7B-v0.1",
    ),
    (
        "docker run --gpus all --env \"HUGGING_FACE_HUB_TOKEN=hf_docker_41\" -p 8000:8000 vllm/vllm-openai:latest \
         --model mistralai/Mistral-7B-v0.1",
        "docker run --gpus all --env \"HUGGING_FACE_HUB_TOKEN=<redacted>\" -p 8000:8000 vllm/vllm-openai:latest \
         --model mistralai/Mistral-7B-v0.1",
    ),
    // vLLM: --hf-token without a value reads the stored login
    (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --hf-token --port 8000 --max-model-len 8192",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --hf-token --port 8000 --max-model-len 8192",
    ),
    (
        "VLLM_API_KEY=vk-env-77 HF_TOKEN=hf_env_88 vllm serve Qwen/Qwen3-4B --hf-token=hf_flag_99 --port 8000",
        "VLLM_API_KEY=<redacted> HF_TOKEN=<redacted> vllm serve Qwen/Qwen3-4B --hf-token=<redacted> --port 8000",
    ),
    // vLLM with a JSON override that carries a token
    (
        "vllm serve m --hf-overrides '{\"token\": \"hf_json_secret\", \"max_position_embeddings\": 32768}' \
         --override-generation-config '{\"eos_token_id\": 2}' --chat-template-kwargs '{\"enable_thinking\": false}'",
        "vllm serve m --hf-overrides '{\"token\": \"<redacted>\", \"max_position_embeddings\": 32768}' \
         --override-generation-config '{\"eos_token_id\": 2}' --chat-template-kwargs '{\"enable_thinking\": false}'",
    ),
    // vLLM streaming weights from S3 with credentials in the environment
    (
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
         vllm serve s3://bucket/model --load-format runai_streamer",
        "AWS_ACCESS_KEY_ID=<redacted> AWS_SECRET_ACCESS_KEY=<redacted> \
         vllm serve s3://bucket/model --load-format runai_streamer",
    ),
    // SGLang server arguments
    (
        "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000 \
         --api-key sk-sglang-1 --admin-api-key adm-sglang-2 --mem-fraction-static 0.8 --max-prefill-tokens 16384 \
         --tokenizer-mode auto --skip-tokenizer-init --kv-cache-dtype fp8_e5m2",
        "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000 \
         --api-key <redacted> --admin-api-key <redacted> --mem-fraction-static 0.8 --max-prefill-tokens 16384 \
         --tokenizer-mode auto --skip-tokenizer-init --kv-cache-dtype fp8_e5m2",
    ),
    // SGLang's Docker command
    (
        "docker run --gpus all --shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface \
         --env \"HF_TOKEN=hf_sglang_docker\" --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server \
         --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000",
        "docker run --gpus all --shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface \
         --env \"HF_TOKEN=<redacted>\" --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server \
         --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000",
    ),
    // llama.cpp's llama-server: the key file and the TLS key are paths, not secrets
    (
        "llama-server -m models/7B/ggml-model.gguf -c 2048 -ngl 99 --host 0.0.0.0 --port 8080 \
         --api-key r6BvC8V3RkO5nJe9 --api-key-file /etc/llama/keys.txt -hft hf_llama_cpp \
         --override-kv tokenizer.ggml.add_bos_token=bool:true --cache-type-k q8_0 \
         --ssl-key-file /etc/ssl/private/server.key --ssl-cert-file /etc/ssl/server.pem",
        "llama-server -m models/7B/ggml-model.gguf -c 2048 -ngl 99 --host 0.0.0.0 --port 8080 \
         --api-key <redacted> --api-key-file /etc/llama/keys.txt -hft <redacted> \
         --override-kv tokenizer.ggml.add_bos_token=bool:true --cache-type-k q8_0 \
         --ssl-key-file /etc/ssl/private/server.key --ssl-cert-file /etc/ssl/server.pem",
    ),
    // llama.cpp downloading a model from a URL with credentials
    (
        "llama-server -mu https://user:hunter2@models.example.com/m.gguf?token=tok-123456&rev=main --port 8080",
        "llama-server -mu https://user:<redacted>@models.example.com/m.gguf?token=<redacted>&rev=main --port 8080",
    ),
    (
        "LLAMA_API_KEY=llama-env-key LLAMA_ARG_CTX_SIZE=4096 llama-server -m model.gguf",
        "LLAMA_API_KEY=<redacted> LLAMA_ARG_CTX_SIZE=4096 llama-server -m model.gguf",
    ),
    // TGI
    (
        "docker run --gpus all --shm-size 1g -p 8080:80 -v $volume:/data -e HF_TOKEN=hf_tgi_secret \
         ghcr.io/huggingface/text-generation-inference:latest --model-id meta-llama/Llama-3.1-8B-Instruct \
         --max-total-tokens 8192 --max-batch-prefill-tokens 4096 --max-input-tokens 4000",
        "docker run --gpus all --shm-size 1g -p 8080:80 -v $volume:/data -e HF_TOKEN=<redacted> \
         ghcr.io/huggingface/text-generation-inference:latest --model-id meta-llama/Llama-3.1-8B-Instruct \
         --max-total-tokens 8192 --max-batch-prefill-tokens 4096 --max-input-tokens 4000",
    ),
    (
        "docker run -e HUGGING_FACE_HUB_TOKEN=$HUGGINGFACE_AUTH_TOKEN --shm-size 1g -p 8081:80 \
         ghcr.io/huggingface/text-generation-inference:1.0.0 --model-id meta-llama/Llama-2-7b-chat-hf",
        "docker run -e HUGGING_FACE_HUB_TOKEN=$HUGGINGFACE_AUTH_TOKEN --shm-size 1g -p 8081:80 \
         ghcr.io/huggingface/text-generation-inference:1.0.0 --model-id meta-llama/Llama-2-7b-chat-hf",
    ),
    (
        "text-generation-launcher --model-id tiiuae/falcon-7b --api-key tgi-key-5 --max-concurrent-requests 128",
        "text-generation-launcher --model-id tiiuae/falcon-7b --api-key <redacted> --max-concurrent-requests 128",
    ),
    // Ollama: nothing secret
    (
        "OLLAMA_HOST=0.0.0.0:11434 OLLAMA_NUM_PARALLEL=4 OLLAMA_MAX_LOADED_MODELS=2 ollama serve",
        "OLLAMA_HOST=0.0.0.0:11434 OLLAMA_NUM_PARALLEL=4 OLLAMA_MAX_LOADED_MODELS=2 ollama serve",
    ),
    // hosted-API clients
    (
        "OPENAI_API_KEY=sk-proj-abc ANTHROPIC_API_KEY=sk-ant-api03-def python bench.py --base-url https://api.openai.com/v1",
        "OPENAI_API_KEY=<redacted> ANTHROPIC_API_KEY=<redacted> python bench.py --base-url https://api.openai.com/v1",
    ),
    (
        "curl http://localhost:8000/v1/models -H \"Authorization: Bearer sk-curl-1\" -H 'Content-Type: application/json' \
         -H 'x-api-key: anthropic-key-2'",
        "curl http://localhost:8000/v1/models -H \"Authorization: Bearer <redacted>\" -H 'Content-Type: application/json' \
         -H 'x-api-key: <redacted>'",
    ),
    // quoting: a multi-word value, `--flag=value` with quotes, a line continuation
    (
        "vllm serve m --api-key \"my secret key\" --port 8000 --api-key='a b c'",
        "vllm serve m --api-key \"<redacted>\" --port 8000 --api-key='<redacted>'",
    ),
    (
        "vllm serve m \\\n  --api-key sk-multi-line \\\n  --max-model-len 8192",
        "vllm serve m \\\n  --api-key <redacted> \\\n  --max-model-len 8192",
    ),
    // a database URL and a token in a URL's user name
    (
        "DATABASE_URL=postgres://bench:dbpass-1@db:5432/runs REDIS_URL=redis://:r3d1s@cache:6379/0 speedmatrix serve",
        "DATABASE_URL=postgres://bench:<redacted>@db:5432/runs REDIS_URL=redis://:<redacted>@cache:6379/0 speedmatrix serve",
    ),
    // model names and paths that contain "token" or "key" are not secrets
    (
        "vllm serve org/token-classifier-key --served-model-name my-token-model --download-dir /keys/tokens",
        "vllm serve org/token-classifier-key --served-model-name my-token-model --download-dir /keys/tokens",
    ),
];

#[test]
fn every_command_of_the_corpus() {
    let mut wrong = Vec::new();
    for (cmd, want) in CORPUS {
        let got = redact_command(cmd);
        if got != *want {
            wrong.push(format!("  {cmd}\n  got:  {got}\n  want: {want}\n"));
        }
        assert_eq!(redact_command(&got), got, "redacting twice changes nothing");
    }
    assert!(wrong.is_empty(), "{} of {} commands redacted wrongly:\n{}", wrong.len(), CORPUS.len(), wrong.join("\n"));
}

#[test]
fn the_values_found_are_exactly_the_secrets() {
    let r = super::redact_command_found(CORPUS[10].0);
    assert_eq!(r.secrets, ["r6BvC8V3RkO5nJe9", "hf_llama_cpp"]);
    let r = super::redact_command_found(CORPUS[1].0);
    assert_eq!(r.secrets, ["sk-mistral-9f8e"]);
}
