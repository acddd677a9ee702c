"""Builds tests/data/schema-invalid/*.json: valid runs with one small mutation each, and index.json
saying what each breaks. Every fixture must be refused by schema/run.schema.json (checked here and
by tests/python/test_schema_invalid.py). Run: python tests/data/schema-invalid/make.py"""
import copy, json, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parents[3]
EP = json.loads((ROOT/'tests/data/golden/every-phase.run.json').read_text())
SAMPLE = json.loads((ROOT/'tests/data/run-sample.json').read_text())
CAP11 = json.loads((ROOT/'tests/data/run-capacity-1.1.json').read_text())

GPU = {"source": "dcgm", "samples": 4, "power_w": 300.0, "energy_j": 1200.0, "energy_from": "counter",
       "joules_per_token": 0.5, "wh_per_million_tokens": 140.0, "throttle": "none",
       "gpus": [{"gpu": "0", "name": "H100", "power_w": 300.0, "sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0,
                 "temp_c_max": 61.0, "util_pct": 97.0, "mem_used_mib_max": 70000.0, "throttle": "none"}]}
RANKS = [{"rank": 0, "streams": 2, "output_tokens": 10, "requests": 2, "client_lag_ms_p99": 0.2, "client_cpu_pct": 3.0}]
SPEC = {"acceptance_length": 2.5, "acceptance_rate": 0.6, "drafts": 100, "accepted": 60}

def ep():
    r = copy.deepcopy(EP)
    cell = r['decode'][0]
    cell['gpu'] = copy.deepcopy(GPU); cell['ranks'] = copy.deepcopy(RANKS); cell['spec_decode'] = copy.deepcopy(SPEC)
    del r['events'][2:]
    return r

def valid_cell(r):
    return next(c for c in r['decode'] if c['status'] == 'valid')

F = {}
def fix(name, what, base, mutate):
    r = copy.deepcopy(base) if not callable(base) else base()
    if not name.startswith(('rate-', 'burst-', 'mixed-', 'sessions-', 'phases-')):
        r.pop('phases', None)  # smaller files: the load phases are optional
    mutate(r)
    F[name] = (what, r)

def setp(path, value):
    def m(r):
        *head, last = path
        o = r
        for k in head:
            o = o[k]
        o[last] = value
    return m

def delp(path):
    def m(r):
        *head, last = path
        o = r
        for k in head:
            o = o[k]
        del o[last]
    return m

# top level
fix('top-unknown-property', 'an unknown top-level field (the record is closed)', ep, setp(['total_tps'], 1.0))
fix('top-missing-decode', 'the required `decode` is missing', ep, delp(['decode']))
fix('top-schema-pattern', '`schema` is not speedmatrix.run/1[.N]', ep, setp(['schema'], 'speedmatrix.run/2'))
fix('top-started-not-utc', '`started` is not UTC RFC 3339 (a +02:00 offset)', ep, setp(['started'], '2026-01-01T10:00:00+02:00'))
fix('top-finished-wrong-type', '`finished` is a number, not a string or null', ep, setp(['finished'], 12))
fix('top-status-unknown', '`status` is not one of the run statuses', ep, setp(['status'], 'done'))
fix('prompts-hash-pattern', 'a prompt hash is not 16 lowercase hex digits', ep, lambda r: r['prompts'][0].update(hash='ABCDEF'))
# tool, server, hardware (provenance)
fix('tool-unknown-property', 'an unknown field in `tool`', ep, setp(['tool', 'build'], 'x'))
fix('tool-client-threads-negative', '`tool.client_threads` below 0', ep, setp(['tool', 'client_threads'], -1))
fix('server-missing-model', '`server.model` is missing', ep, delp(['server', 'model']))
fix('server-engine-unknown', '`server.engine` is not a known engine', ep, setp(['server', 'engine'], 'ollama'))
fix('server-max-num-seqs-over-u32', '`server.max_num_seqs` over 2^32-1', ep, setp(['server', 'max_num_seqs'], 4294967296))
fix('hardware-gpu-count-negative', '`hardware.gpu_count` below 0', ep, setp(['hardware', 'gpu_count'], -1))
fix('hardware-gpu-unknown-property', 'an unknown field in a `hardware.gpus` entry', ep, setp(['hardware', 'gpus'], [{"name": "H100", "memory_mib": 81559, "uuid": "x"}]))
# settings
fix('settings-unknown-property', 'an unknown field in `settings`', ep, setp(['settings', 'durations'], [30]))
fix('settings-duration-wrong-type', '`settings.duration_s` is a string', ep, setp(['settings', 'duration_s'], '30s'))
fix('settings-capacity-rule-unknown', '`settings.capacity_rule` is not a known rule', ep, setp(['settings', 'capacity_rule'], 'loose'))
fix('settings-precision-zero', '`settings.precision_pct` is 0 (must be above 0)', ep, setp(['settings', 'precision_pct'], 0))
fix('settings-concurrency-negative', 'a `settings.concurrency` entry below 0', ep, lambda r: r['settings']['concurrency'].append(-1))
fix('settings-api-unknown', '`settings.api` is not chat or completions', ep, setp(['settings', 'api'], 'responses'))
# plan
fix('plan-label-pattern', 'a plan entry label that is not 1K-style or a small number', ep, lambda r: r['plan'][0].update(label='1k'))
fix('plan-status-unknown', 'a plan entry status that is not planned/over_capacity/skipped', ep, lambda r: r['plan'][0].update(status='maybe'))
# prefill
fix('prefill-ttft-zero-valid', 'a valid prefill row with ttft_ms 0 (a valid row measured something)', ep, lambda r: r['prefill'][0].update(ttft_ms=0))
fix('prefill-unknown-property', 'an unknown field in a prefill row', ep, lambda r: r['prefill'][0].update(ttft_s=1.0))
fix('prefill-label-pattern', 'a prefill row label with a lowercase k', ep, lambda r: r['prefill'][0].update(label='4k'))
# decode
fix('decode-renamed-field', 'a decode cell with total_tok_s renamed to total_tps', ep, lambda r: r['decode'][0].update(total_tps=r['decode'][0].pop('total_tok_s')))
fix('decode-goodput-over-100', 'a decode cell with goodput_pct above 100', ep, lambda r: valid_cell(r).update(goodput_pct=100.5))
fix('decode-cache-hit-negative', 'a decode cell with prompt_cache_hit_pct below 0', ep, lambda r: valid_cell(r).update(prompt_cache_hit_pct=-1))
fix('decode-status-unknown', 'a decode cell status that is not a cell status', ep, lambda r: r['decode'][0].update(status='ok'))
fix('decode-valid-null-throughput', 'a valid decode cell with total_tok_s null', ep, lambda r: valid_cell(r).update(total_tok_s=None))
fix('decode-valid-zero-output', 'a valid decode cell with output_tokens 0', ep, lambda r: valid_cell(r).update(output_tokens=0))
fix('decode-over-capacity-with-figures', 'an over-capacity cell that carries a throughput', CAP11, lambda r: next(c for c in r['decode'] if c['status'] == 'over_capacity').update(total_tok_s=5.0))
fix('decode-over-capacity-no-kv-need', 'an over-capacity cell without kv_need_tokens', CAP11, lambda r: next(c for c in r['decode'] if c['status'] == 'over_capacity').pop('kv_need_tokens'))
fix('decode-client-retries-zero', 'a decode cell with client_retries 0 (absent unless at least 1)', ep, lambda r: valid_cell(r).update(client_retries=0))
fix('decode-ci-unknown-property', 'an unknown interval in a decode cell\'s ci', ep, lambda r: valid_cell(r)['ci'].update(e2e_ms_p50={"lo": 1, "hi": 2}))
fix('decode-interval-missing-hi', 'a confidence interval without hi', ep, lambda r: valid_cell(r)['ci']['total_tok_s'].pop('hi'))
fix('decode-slo-bound-pattern', 'an SLO bound check named e2e_p99 (not tok_s/ttft/tbt_pNN)', ep, lambda r: valid_cell(r)['slo_bounds'][0].update(bound='e2e_p99'))
fix('decode-token-source-unknown', 'a decode cell token_source that is not a known source', ep, lambda r: valid_cell(r).update(token_source='guess'))
fix('decode-rank-missing-streams', 'a rank entry without streams', ep, lambda r: r['decode'][0]['ranks'][0].pop('streams'))
fix('decode-spec-acceptance-rate-over-1', 'speculative decoding acceptance_rate above 1', ep, lambda r: r['decode'][0]['spec_decode'].update(acceptance_rate=1.2))
fix('decode-spec-acceptance-length-below-1', 'speculative decoding acceptance_length below 1', ep, lambda r: r['decode'][0]['spec_decode'].update(acceptance_length=0.5))
# telemetry: gpu, server metrics
fix('gpu-source-unknown', 'a GPU telemetry source that is not nvml/dcgm/amd', ep, lambda r: r['decode'][0]['gpu'].update(source='rocm-smi'))
fix('gpu-no-gpus', 'GPU telemetry with an empty gpus list', ep, lambda r: r['decode'][0]['gpu'].update(gpus=[]))
fix('gpu-util-over-100', 'a GPU util_pct above 100', ep, lambda r: r['decode'][0]['gpu']['gpus'][0].update(util_pct=101))
fix('gpu-throttle-unknown', 'a GPU throttle reason that is not known', ep, lambda r: r['decode'][0]['gpu'].update(throttle='clock'))
fix('gpu-power-negative', 'a negative GPU power_w', ep, lambda r: r['decode'][0]['gpu'].update(power_w=-3.0))
fix('server-metrics-prefix-hit-over-100', 'server metrics with prefix_hit_pct above 100', ep, lambda r: valid_cell(r)['server_metrics'].update(prefix_hit_pct=150))
fix('server-metrics-unknown-property', 'an unknown field in a cell\'s server metrics', ep, lambda r: valid_cell(r)['server_metrics'].update(kv_pct=1))
fix('server-metrics-point-unknown-property', 'an unknown field in a server metrics series point', ep, lambda r: valid_cell(r)['server_metrics']['series'][0].update(extra=1))
fix('server-metrics-too-many-points', 'a server metrics series over 600 points', ep, lambda r: valid_cell(r)['server_metrics'].update(series=valid_cell(r)['server_metrics']['series'] * 300))
# capacity answer
fix('capacity-bounded-by-pattern', 'a capacity answer bounded_by that is not a known bound', ep, lambda r: r['capacity'][0].update(bounded_by='memory'))
fix('capacity-unknown-property', 'an unknown field in a capacity answer', ep, lambda r: r['capacity'][0].update(streams=3))
fix('capacity-missing-context', 'a capacity answer without context', ep, lambda r: r['capacity'][0].pop('context'))
# rate phase
fix('rate-arrival-pattern', 'a rate phase arrival that is not poisson/constant/gamma:K', ep, lambda r: r['phases']['rate']['settings'].update(arrival='uniform'))
fix('rate-rate-zero', 'a rate of 0 requests per second', ep, lambda r: r['phases']['rate']['settings']['rates'].__setitem__(0, 0))
fix('rate-rate-bad-string', 'a rate that is a string other than "inf"', ep, lambda r: r['phases']['rate']['levels'][0].update(rate='max'))
fix('rate-level-goodput-over-100', 'a rate level with goodput_pct above 100', ep, lambda r: r['phases']['rate']['levels'][0].update(goodput_pct=120))
fix('rate-level-unknown-property', 'an unknown field in a rate level', ep, lambda r: r['phases']['rate']['levels'][0].update(qps=1))
fix('rate-level-status-unknown', 'a rate level status that is not known', ep, lambda r: r['phases']['rate']['levels'][0].update(status='done'))
fix('rate-counts-negative', 'a rate level count below 0', ep, lambda r: r['phases']['rate']['levels'][0]['counts'].update(ok=-1) if 'ok' in r['phases']['rate']['levels'][0]['counts'] else r['phases']['rate']['levels'][0]['counts'].update({next(iter(r['phases']['rate']['levels'][0]['counts'])): -1}))
# burst
fix('burst-unknown-property', 'an unknown field in a burst', ep, lambda r: r['phases']['burst']['bursts'][0].update(size=4))
fix('burst-status-unknown', 'a burst status that is not a cell status', ep, lambda r: r['phases']['burst']['bursts'][0].update(status='fine'))
fix('burst-phase-unknown-property', 'an unknown field in the burst phase', ep, lambda r: r['phases']['burst'].update(waves=2))
# mixed prefill
fix('mixed-level-unknown-property', 'an unknown field in a mixed-prefill level', ep, lambda r: r['phases']['mixed_prefill']['levels'][0].update(foo=1))
fix('mixed-probe-missing-field', 'a mixed-prefill probe without a required field', ep, lambda r: r['phases']['mixed_prefill']['levels'][0]['probes'][0].pop(next(iter(r['phases']['mixed_prefill']['levels'][0]['probes'][0]))))
fix('mixed-too-many-levels', 'a mixed-prefill phase with more than 16 levels', ep, lambda r: r['phases']['mixed_prefill'].update(levels=r['phases']['mixed_prefill']['levels'] * 17))
# sessions
fix('sessions-cache-hit-over-100', 'a sessions summary cache_hit_pct above 100', ep, lambda r: r['phases']['sessions']['summary'].update(cache_hit_pct=100.1))
fix('sessions-settings-unknown-property', 'an unknown field in the sessions settings', ep, lambda r: r['phases']['sessions']['settings'].update(think=1))
fix('sessions-turn-wrong-type', 'a session turn whose turn number is a string', ep, lambda r: r['phases']['sessions']['sessions'][0]['turns'][0].update(turn='1'))
fix('sessions-status-unknown', 'a session status that is not known', ep, lambda r: r['phases']['sessions']['sessions'][0].update(status='partial'))
fix('phases-unknown-phase', 'an unknown load phase', ep, lambda r: r['phases'].update(soak={}))
# events
fix('event-missing-text', 'an event without text', ep, lambda r: r['events'][0].pop('text'))

import jsonschema
schema = json.loads((ROOT/'schema/run.schema.json').read_text())
v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
# the bases are valid
for b in (ep(), SAMPLE, CAP11):
    v.validate(b)
out = ROOT/'tests/data/schema-invalid'
bad = 0
index = {}
for name, (what, r) in sorted(F.items()):
    errs = list(v.iter_errors(r))
    if not errs:
        print('ACCEPTED', name); bad += 1; continue
    (out/f'{name}.json').write_text(json.dumps(r) + '\n')
    index[f'{name}.json'] = what
(out/'index.json').write_text(json.dumps(index, indent=1) + '\n')
print(len(index), 'fixtures', bad, 'accepted')
