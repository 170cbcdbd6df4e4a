// gpt-oss's chat format, harmony: a reply is a run of messages, each "<|channel|>NAME[ to=RECIPIENT]
// [<|constrain|>TYPE]<|message|>BODY" ended by <|end|> (then "<|start|>assistant" opens the next), and
// the turn by <|return|> or, after a tool call, <|call|>. The analysis channel is the model's reasoning,
// the final channel its answer, and a commentary message addressed "to=functions.NAME" a call of tool
// NAME with the body as its JSON arguments (a commentary without a recipient is a preamble shown to
// the user). The tokenizer prints <|start|>, <|channel|>, <|message|> and <|constrain|> (llama.cpp
// does too) but not the end markers, so the decoded text reads, for example:
//   <|channel|>analysis<|message|>The user asks...<|start|>assistant<|channel|>final<|message|>Paris.
#pragma once

#include <string>
#include <vector>

namespace loom::server {

struct HarmonyCall {
  std::string name;       // the recipient after "functions."
  std::string arguments;  // the body, trimmed
};

struct HarmonyReply {
  std::string reasoning;  // the analysis messages' bodies
  std::string content;    // the final (and preamble) messages' bodies
  std::vector<HarmonyCall> calls;
  bool closed = false;    // a final or tool-call message began: the reasoning is over
};

// Whether a chat template writes harmony (gpt-oss's).
bool template_is_harmony(const std::string& template_source);

// The reply read so far. A message whose header is not complete yet contributes nothing, so the
// reasoning and the content only ever grow as text is appended (streaming sends their new parts).
HarmonyReply parse_harmony(const std::string& text);

}  // namespace loom::server
