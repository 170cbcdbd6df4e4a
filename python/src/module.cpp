// loom._loom: the engine for Python (python/loom/__init__.py wraps it in vLLM-style classes). A Session
// owns one engine running on its own thread; generate() submits a batch of prompts and waits for all
// of them with the GIL released, stream() hands out one request's pieces as they come. Ctrl-C while
// waiting cancels the requests (their KV blocks are freed) and raises KeyboardInterrupt; loom::Error
// becomes loom.LoomError with the message the CLI would print.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <deque>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/error.h"
#include "config/config.h"
#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "model/default_model.h"
#include "request_inbox.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace loom::python {

namespace {

constexpr std::chrono::milliseconds kSignalCheck{100};

// Per-request settings, as the Python SamplingParams passes them (a dict of what was set).
struct Settings {
  uint32_t max_tokens = 16;
  std::optional<float> temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::optional<uint32_t> logprobs;
  std::optional<std::string> json_schema;
};

template <typename T>
std::optional<T> optional_item(const nb::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return nb::cast<T>(d[key]);
}

Settings settings_from(const nb::dict& d) {
  Settings s;
  if (auto v = optional_item<uint32_t>(d, "max_tokens")) s.max_tokens = *v;
  s.temperature = optional_item<float>(d, "temperature");
  s.top_p = optional_item<float>(d, "top_p");
  s.min_p = optional_item<float>(d, "min_p");
  s.top_k = optional_item<int32_t>(d, "top_k");
  s.presence_penalty = optional_item<float>(d, "presence_penalty");
  s.frequency_penalty = optional_item<float>(d, "frequency_penalty");
  s.repetition_penalty = optional_item<float>(d, "repetition_penalty");
  s.seed = optional_item<uint64_t>(d, "seed");
  if (auto v = optional_item<std::vector<std::string>>(d, "stop")) s.stop = *v;
  if (auto v = optional_item<bool>(d, "ignore_eos")) s.ignore_eos = *v;
  s.logprobs = optional_item<uint32_t>(d, "logprobs");
  s.json_schema = optional_item<std::string>(d, "json_schema");
  return s;
}

// What one finished (or streaming) request produced.
struct Output {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<float> logprobs;  // the chosen tokens', with SamplingParams(logprobs=...)
  std::string finish_reason;    // "" while unfinished
  std::string error;
  uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  double ttft_seconds = 0;

  void add(const RequestEvent& e) {
    token_ids.insert(token_ids.end(), e.tokens.begin(), e.tokens.end());
    text += e.text;
    for (const TokenLogprob& lp : e.logprobs) logprobs.push_back(lp.logprob);
    if (e.finish == FinishReason::none) return;
    finish_reason = finish_reason_name(e.finish);
    error = e.error;
    prompt_tokens = e.n_prompt_tokens;
    completion_tokens = e.n_completion_tokens;
    cached_tokens = e.n_cached_tokens;
    ttft_seconds = e.ttft_seconds;
  }
};

nb::dict to_dict(const Output& o) {
  nb::dict d;
  d["token_ids"] = o.token_ids;
  d["text"] = o.text;
  d["logprobs"] = o.logprobs;
  d["finish_reason"] = o.finish_reason.empty() ? nb::none() : nb::cast(o.finish_reason);
  d["prompt_tokens"] = o.prompt_tokens;
  d["completion_tokens"] = o.completion_tokens;
  d["cached_tokens"] = o.cached_tokens;
  d["ttft_seconds"] = o.ttft_seconds;
  return d;
}

// Waits for `inbox` with the GIL released; between waits, with the GIL, a pending Ctrl-C runs
// `on_interrupt` and raises. Returns the events that arrived.
std::vector<std::pair<size_t, RequestEvent>> wait_interruptibly(RequestInbox& inbox, const std::function<void()>& on_interrupt) {
  std::vector<std::pair<size_t, RequestEvent>> events;
  {
    nb::gil_scoped_release release;
    events = inbox.wait(kSignalCheck);
  }
  if (PyErr_CheckSignals() != 0) {
    on_interrupt();
    throw nb::python_error();
  }
  return events;
}

class Session;

// One request's pieces as they come (Session::stream).
class Stream {
 public:
  Stream(std::shared_ptr<Engine> engine, std::shared_ptr<RequestInbox> inbox, RequestId id)
      : engine_(std::move(engine)), inbox_(std::move(inbox)), id_(id) {}
  ~Stream() { cancel(); }

  // The next piece: {"text", "token_ids", "logprobs", "finish_reason" (None until the last), usage};
  // StopIteration after the last.
  nb::dict next() {
    if (finished_ && pending_.empty()) throw nb::stop_iteration();
    while (pending_.empty()) {
      for (auto& [slot, event] : wait_interruptibly(*inbox_, [this] { cancel(); })) pending_.push_back(std::move(event));
    }
    const RequestEvent event = std::move(pending_.front());
    pending_.pop_front();
    if (event.finish != FinishReason::none) finished_ = true;
    if (event.finish == FinishReason::error) throw Error("generation failed: " + event.error);
    Output piece;
    piece.add(event);
    return to_dict(piece);
  }

  // Ends the request early (its KV blocks are freed); the pieces already made still come out.
  void cancel() {
    if (finished_) return;
    engine_->cancel(id_);
    finished_ = true;
  }

 private:
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<RequestInbox> inbox_;
  RequestId id_;
  std::deque<RequestEvent> pending_;
  bool finished_ = false;
};

class Session {
 public:
  Session(const std::string& model_path, const std::string& config_toml, const std::vector<std::string>& plugin_dirs) {
    Config config = config_toml.empty() ? Config{} : parse_config(config_toml, "loom.LLM config");
    config.plugins.search_path.insert(config.plugins.search_path.begin(), plugin_dirs.begin(), plugin_dirs.end());
    nb::gil_scoped_release release;  // loading takes a while; other Python threads go on
    engine_ = std::make_shared<Engine>(config, model_path);
    template_ = chat::ChatTemplate::for_model(engine_->gguf());
    engine_->start();
  }
  ~Session() { close(); }

  void close() {
    if (!engine_) return;
    nb::gil_scoped_release release;
    engine_->stop(false);
    engine_.reset();
  }

  std::vector<int32_t> encode(const std::string& text, bool add_special) const {
    return engine().tokenizer().encode(text, add_special, add_special);
  }
  std::string decode(const std::vector<int32_t>& ids) const { return engine().tokenizer().decode(ids); }

  // The chat template's prompt for `context_json` (messages, tools, template flags) and its tokens.
  std::vector<int32_t> chat_prompt(const std::string& context_json) const {
    const Tokenizer& tok = engine().tokenizer();
    nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_json);
    context["add_generation_prompt"] = true;
    context["bos_token"] = tok.bos_id() >= 0 ? tok.token_text(tok.bos_id()) : "";
    context["eos_token"] = tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : "";
    std::vector<int32_t> tokens = tok.encode(template_->render(context), false, true);
    if (tok.add_bos() && tok.bos_id() >= 0 && (tokens.empty() || tokens.front() != tok.bos_id())) tokens.insert(tokens.begin(), tok.bos_id());
    return tokens;
  }

  // Every prompt through the engine's continuous batching; their outputs in order.
  nb::list generate(const std::vector<std::vector<int32_t>>& prompts, const std::vector<nb::dict>& settings) {
    if (settings.size() != prompts.size()) throw Error("generate: one SamplingParams per prompt");
    std::vector<Request> requests;
    for (size_t i = 0; i < prompts.size(); ++i) requests.push_back(request_for(prompts[i], settings_from(settings[i])));
    auto inbox = std::make_shared<RequestInbox>(false);
    std::vector<RequestId> ids;
    auto cancel_all = [&] {
      for (RequestId id : ids) engine_->cancel(id);
    };
    try {
      for (size_t i = 0; i < requests.size(); ++i) {
        requests[i].on_event = [inbox, i](const RequestEvent& e) { inbox->push(i, e); };
        ids.push_back(engine_->submit(std::move(requests[i])));
      }
    } catch (...) {
      cancel_all();  // nothing half-done stays queued
      throw;
    }
    std::vector<Output> outputs(prompts.size());
    size_t finished = 0;
    while (finished < outputs.size()) {
      for (auto& [slot, event] : wait_interruptibly(*inbox, cancel_all)) {
        outputs[slot].add(event);
        if (event.finish != FinishReason::none) ++finished;
      }
    }
    nb::list out;
    for (const Output& o : outputs) {
      if (o.finish_reason == "error") throw Error("generation failed: " + o.error);
      out.append(to_dict(o));
    }
    return out;
  }

  std::unique_ptr<Stream> stream(const std::vector<int32_t>& prompt, const nb::dict& settings) {
    Request request = request_for(prompt, settings_from(settings));
    auto inbox = std::make_shared<RequestInbox>(true);
    request.on_event = [inbox](const RequestEvent& e) { inbox->push(0, e); };
    const RequestId id = engine_->submit(std::move(request));
    return std::make_unique<Stream>(engine_, inbox, id);
  }

  nb::dict info() const {
    const EngineInfo& i = engine().info();
    nb::dict d;
    d["model_path"] = i.model_path;
    d["model_name"] = i.model_name;
    d["backend"] = i.backend_name;
    d["device"] = i.device_name;
    d["n_ctx"] = i.n_ctx;
    d["kv_blocks"] = i.kv_blocks;
    d["max_num_seqs"] = i.max_num_seqs;
    return d;
  }

  size_t unfinished() const { return engine().n_unfinished(); }

 private:
  const Engine& engine() const {
    if (!engine_) throw Error("this LLM is closed");
    return *engine_;
  }

  Request request_for(const std::vector<int32_t>& prompt, const Settings& s) const {
    Request r;
    r.prompt = prompt;
    r.max_tokens = s.max_tokens;
    auto& p = r.sampling.params;
    p = engine().default_sampling();
    if (s.temperature) p.temperature = *s.temperature;
    if (s.top_p) p.top_p = *s.top_p;
    if (s.top_k) p.top_k = std::max(*s.top_k, 0);
    if (s.min_p) p.min_p = *s.min_p;
    if (s.presence_penalty) p.presence_penalty = *s.presence_penalty;
    if (s.frequency_penalty) p.frequency_penalty = *s.frequency_penalty;
    if (s.repetition_penalty) p.repetition_penalty = *s.repetition_penalty;
    r.sampling.seed = s.seed;
    r.stop = s.stop;
    r.ignore_eos = s.ignore_eos;
    r.want_logprobs = s.logprobs.has_value();
    r.n_logprobs = s.logprobs.value_or(0);
    if (s.json_schema) r.constraint = engine().compile_constraint({GrammarSpec::Kind::json_schema, *s.json_schema, {}, false});
    return r;
  }

  std::shared_ptr<Engine> engine_;
  std::optional<chat::ChatTemplate> template_;
};

}  // namespace

}  // namespace loom::python

NB_MODULE(_loom, m) {
  using namespace loom::python;
  m.doc() = "Loom's engine (use the loom package's LLM class)";
  nb::exception<loom::Error>(m, "LoomError", PyExc_RuntimeError);
  m.def("default_model", [] { return loom::default_model_path().string(); },
        "The default model scripts/setup.sh installs (Gemma 3 270M); LoomError saying how to install it when absent.");
  nb::class_<Stream>(m, "Stream")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &Stream::next)
      .def("cancel", &Stream::cancel);
  nb::class_<Session>(m, "Session")
      .def(nb::init<const std::string&, const std::string&, const std::vector<std::string>&>(), "model_path"_a, "config_toml"_a,
           "plugin_dirs"_a)
      .def("close", &Session::close)
      .def("encode", &Session::encode, "text"_a, "add_special"_a = true)
      .def("decode", &Session::decode, "token_ids"_a)
      .def("chat_prompt", &Session::chat_prompt, "context_json"_a)
      .def("generate", &Session::generate, "prompts"_a, "settings"_a)
      .def("stream", &Session::stream, "prompt"_a, "settings"_a)
      .def("info", &Session::info)
      .def("unfinished", &Session::unfinished);
}
