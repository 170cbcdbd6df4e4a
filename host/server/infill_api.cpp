#include "server/infill_api.h"

#include <chrono>

#include "server/http_util.h"
#include "server/whole_answer.h"
#include "server/openai_parse.h"
#include "server/sse_stream.h"

namespace loom::server {

namespace {

using nlohmann::json;

// llama.cpp's stop_type: "limit" when n_predict ran out, else "eos" (an end of generation or a stop string).
const char* stop_type(const ChoiceProgress& choice) { return choice.finish == FinishReason::length ? "limit" : "eos"; }

json final_fields(GenerationJob& job, const ChoiceProgress& choice) {
  return {{"stop", true},
          {"model", job.state().model_name},
          {"tokens_predicted", choice.n_completion},
          {"tokens_evaluated", choice.n_prompt},
          {"tokens_cached", choice.n_cached},
          {"stop_type", stop_type(choice)},
          {"truncated", false}};
}

}  // namespace

json llama_completion_chunk(GenerationJob& job, const ChoiceEvent& event) {
  const ChoiceProgress& choice = job.choices()[event.choice];
  json chunk = {{"index", event.choice}, {"content", event.event.text}, {"tokens", event.event.tokens}, {"stop", false}};
  if (event.event.finish != FinishReason::none) chunk.update(final_fields(job, choice));
  return chunk;
}

void add_infill_route(httplib::Server& http, ModelRegistry& models) {
  http.Post("/infill", guarded([&models](const httplib::Request& req, httplib::Response& res) {
              ActiveGuard active(models.server());
              GenerationParams params = parse_infill_request(parse_json_body(req.body));
              if (params.n != 1) throw invalid_param("n", "/infill answers one completion per request");
              ModelLease model = models.acquire(params.model);
              auto job = std::make_shared<GenerationJob>(std::move(model), std::move(params));
              job->submit();
              if (job->params().stream) {
                stream_job(std::move(job), res, llama_cpp_stream_format());
                return;
              }
              wait_for_whole_answer(*job);
              const ChoiceProgress& choice = job->choices().front();
              json body = {{"index", 0}, {"content", choice.text}, {"tokens", json::array()}};
              body.update(final_fields(*job, choice));
              send_json(res, 200, body);
            }));
}

}  // namespace loom::server
