// ApiError — a request the server refuses, with the HTTP status and OpenAI's error body
// {"error": {"message", "type", "param", "code"}} so clients (the openai SDK included) show the reason.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace loom::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::optional<std::string> param = std::nullopt,
           std::string type = "invalid_request_error", std::optional<std::string> code = std::nullopt)
      : std::runtime_error(message), status_(status), param_(std::move(param)), type_(std::move(type)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  // Seconds a client should wait before retrying (the Retry-After header); 0 = none.
  int64_t retry_after() const { return retry_after_; }
  void set_retry_after(int64_t seconds) { retry_after_ = seconds; }
  const std::optional<std::string>& param() const { return param_; }

  nlohmann::json body() const { return error_body(what(), type_, param_, code_); }

  static nlohmann::json error_body(const std::string& message, const std::string& type,
                                   const std::optional<std::string>& param, const std::optional<std::string>& code) {
    nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (param) error["param"] = *param;
    if (code) error["code"] = *code;
    return {{"error", error}};
  }

 private:
  int status_;
  std::optional<std::string> param_;
  std::string type_;
  std::optional<std::string> code_;
  int64_t retry_after_ = 0;
};

// 400 naming the field, the most common refusal.
inline ApiError invalid_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, param);
}

}  // namespace loom::server
