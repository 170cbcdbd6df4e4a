// One tool call written as a JSON object, {"name": ..., "arguments" | "parameters": {...}}, read a
// character at a time, as Hermes (<tool_call>...</tool_call>), Llama 3, Mistral ([TOOL_CALLS][...]) and
// forced calls ([{"name", "parameters"}]) write it. The name is reported once its string closes and the
// arguments value piece by piece as it is generated, so a stream can send argument deltas as OpenAI's
// and Anthropic's streams do. Arguments written before the name are held until the name is known.
#pragma once

#include <string>
#include <string_view>

namespace loom::server {

class CallJsonScanner {
 public:
  // Pieces of the call found by one feed: the name (once), argument text, and whether the object closed.
  struct Found {
    std::string name;  // non-empty the first time the name is known
    std::string arguments;
    bool closed = false;
    size_t consumed = 0;  // characters of the input read (all of them unless the object closed)
  };

  // Reads `text` up to the end of the object (the rest is left to the caller: `consumed`).
  Found feed(std::string_view text);

  bool started() const { return depth_ > 0 || closed_; }
  bool closed() const { return closed_; }
  const std::string& raw() const { return raw_; }  // every character of the object read so far
  const std::string& name() const { return name_; }

 private:
  void value_ended(Found& found);

  std::string raw_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, closed_ = false;
  // At depth 1: reading a key (expecting_key_), or the value of key_ (after its ':').
  bool expecting_key_ = true, in_value_ = false;
  std::string key_;
  size_t string_start_ = 0, value_start_ = 0;
  int value_depth_ = 0;  // depth_ when the value started
  std::string name_;
  std::string held_arguments_;  // arguments seen before the name
  bool arguments_open_ = false;
};

}  // namespace loom::server
