// mscclpp/errors.hpp stand-in — MSCCL++'s error types with MSCCL++'s
// signatures (not its code): lets the tests check that the adapter throws
// mscclpp::Error, found through __has_include(<mscclpp/errors.hpp>) as with a
// real MSCCL++ on the include path.
#pragma once

#include <stdexcept>
#include <string>

namespace mscclpp {

enum class ErrorCode {
  SystemError,
  InternalError,
  RemoteError,
  InvalidUsage,
  Timeout,
  Aborted,
  ExecutorError,
};

class BaseError : public std::runtime_error {
 public:
  BaseError(const std::string& message, int errorCode)
      : std::runtime_error(""), message_(message), errorCode_(errorCode) {}
  explicit BaseError(int errorCode) : std::runtime_error(""), errorCode_(errorCode) {}
  virtual ~BaseError() = default;
  int getErrorCode() const { return errorCode_; }
  const char* what() const noexcept override { return message_.c_str(); }

 protected:
  std::string message_;
  int errorCode_;
};

class Error : public BaseError {
 public:
  Error(const std::string& message, ErrorCode errorCode) : BaseError(message, static_cast<int>(errorCode)) {}
  virtual ~Error() = default;
  ErrorCode getErrorCode() const { return static_cast<ErrorCode>(errorCode_); }
};

}  // namespace mscclpp
