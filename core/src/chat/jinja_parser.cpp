// Recursive-descent parser with Jinja's precedence: conditional < or < and < not < comparison/in/is
// < + - < ~ < * / // % < unary - < ** < postfix (. [] () |filter).
#include <set>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "common/error.h"

namespace loom::jinja {
namespace {

using K = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    std::string stopped_at;
    Body body = parse_body({}, stopped_at);
    if (peek().kind != K::eof) fail("unexpected '" + peek().text + "'");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == K::op && peek(ahead).text == op; }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == K::name && peek(ahead).text == name;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw Error("chat template: line " + std::to_string(peek().line) + ": " + message);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case K::eof: return "the end of the template";
      case K::var_end: return "'}}'";
      case K::block_end: return "'%}'";
      case K::text: return "template text";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "' but found " + describe(peek()));
    ++pos_;
  }
  std::string expect_name(const char* what) {
    if (peek().kind != K::name) fail(std::string("expected ") + what + " but found " + describe(peek()));
    return next().text;
  }
  void expect_block_end(const char* after) {
    if (peek().kind != K::block_end) fail(std::string("expected '%}' after ") + after + " but found " + describe(peek()));
    ++pos_;
  }

  // Statements until a block tag whose keyword is in `stops` (left unconsumed, keyword in `stopped_at`).
  Body parse_body(const std::set<std::string>& stops, std::string& stopped_at) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == K::eof) {
        if (!stops.empty()) {
          std::string names;
          for (const auto& s : stops) names += (names.empty() ? "" : " or ") + ("{% " + s + " %}");
          fail("unexpected end of template: expected " + names);
        }
        return body;
      }
      if (t.kind == K::text) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::text;
        stmt->text = next().text;
        body.push_back(std::move(stmt));
      } else if (t.kind == K::var_begin) {
        ++pos_;
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::output;
        stmt->line = t.line;
        stmt->expr = parse_expr();
        if (peek().kind != K::var_end) fail("expected '}}' but found " + describe(peek()));
        ++pos_;
        body.push_back(std::move(stmt));
      } else if (t.kind == K::block_begin) {
        const Token& kw = peek(1);
        if (kw.kind != K::name) fail("expected a statement keyword after '{%'");
        if (stops.count(kw.text)) {
          stopped_at = kw.text;
          return body;
        }
        ++pos_;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    const int line = peek().line;
    const std::string kw = next().text;
    auto stmt = std::make_unique<Stmt>();
    stmt->line = line;
    std::string stopped;
    if (kw == "if") {
      stmt->kind = Stmt::Kind::if_;
      ExprPtr cond = parse_expr();
      expect_block_end("the if condition");
      while (true) {
        Body branch = parse_body({"elif", "else", "endif"}, stopped);
        stmt->branches.emplace_back(std::move(cond), std::move(branch));
        pos_ += 2;  // "{%" keyword
        if (stopped == "elif") {
          cond = parse_expr();
          expect_block_end("the elif condition");
          continue;
        }
        if (stopped == "else") {
          expect_block_end("else");
          stmt->else_body = parse_body({"endif"}, stopped);
          pos_ += 2;
        }
        expect_block_end("endif");
        return stmt;
      }
    }
    if (kw == "for") {
      stmt->kind = Stmt::Kind::for_;
      stmt->targets.push_back(expect_name("a loop variable"));
      while (is_op(",")) {
        ++pos_;
        stmt->targets.push_back(expect_name("a loop variable"));
      }
      if (!is_name("in")) fail("expected 'in' in the for statement but found " + describe(peek()));
      ++pos_;
      stmt->expr = parse_or_expr();  // a bare `if` here filters, so no conditional expression
      if (is_name("if")) {
        ++pos_;
        stmt->filter = parse_or_expr();
      }
      expect_block_end("the for statement");
      stmt->body = parse_body({"else", "endfor"}, stopped);
      pos_ += 2;
      if (stopped == "else") {
        expect_block_end("else");
        stmt->else_body = parse_body({"endfor"}, stopped);
        pos_ += 2;
      }
      expect_block_end("endfor");
      return stmt;
    }
    if (kw == "set") {
      std::string target = expect_name("a variable name");
      stmt->targets.push_back(target);
      if (is_op(".")) {
        ++pos_;
        stmt->targets.push_back(expect_name("an attribute name"));
      }
      if (is_op("=")) {
        ++pos_;
        stmt->kind = Stmt::Kind::set;
        stmt->expr = parse_expr();
        expect_block_end("the set statement");
        return stmt;
      }
      stmt->kind = Stmt::Kind::set_block;
      expect_block_end("the set statement");
      stmt->body = parse_body({"endset"}, stopped);
      pos_ += 2;
      expect_block_end("endset");
      return stmt;
    }
    if (kw == "macro") {
      stmt->kind = Stmt::Kind::macro;
      stmt->targets.push_back(expect_name("a macro name"));
      expect_op("(");
      while (!is_op(")")) {
        std::string param = expect_name("a parameter name");
        ExprPtr fallback;
        if (is_op("=")) {
          ++pos_;
          fallback = parse_expr();
        }
        stmt->params.emplace_back(std::move(param), std::move(fallback));
        if (!is_op(")")) expect_op(",");
      }
      ++pos_;
      expect_block_end("the macro signature");
      stmt->body = parse_body({"endmacro"}, stopped);
      pos_ += 2;
      expect_block_end("endmacro");
      return stmt;
    }
    if (kw == "break" || kw == "continue") {
      stmt->kind = kw == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_block_end(kw.c_str());
      return stmt;
    }
    if (kw == "generation" || kw == "endgeneration") {  // HF's assistant-mask markers: no output
      stmt->kind = Stmt::Kind::text;
      expect_block_end(kw.c_str());
      return stmt;
    }
    pos_ -= 1;
    fail("unknown or misplaced statement '{% " + kw + " %}'");
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(Expr::Kind::binary, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_expr() {
    ExprPtr value = parse_or_expr();
    if (!is_name("if")) return value;
    const int line = next().line;
    auto e = make(Expr::Kind::conditional, line);
    e->args.push_back(parse_or_expr());
    e->args.push_back(std::move(value));
    if (is_name("else")) {
      ++pos_;
      e->args.push_back(parse_expr());
    } else {
      e->args.push_back(nullptr);
    }
    return e;  // args: [cond, then, else]
  }

  ExprPtr parse_or_expr() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      const int line = next().line;
      auto e = make(Expr::Kind::unary, line);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    while (true) {
      const int line = peek().line;
      static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
      bool matched = false;
      for (const char* op : ops) {
        if (is_op(op)) {
          ++pos_;
          left = binary(op, std::move(left), parse_math1(), line);
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (is_name("in")) {
        ++pos_;
        left = binary("in", std::move(left), parse_math1(), line);
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        left = binary("not in", std::move(left), parse_math1(), line);
      } else if (is_name("is")) {
        ++pos_;
        auto e = make(Expr::Kind::test, line);
        if (is_name("not")) {
          ++pos_;
          e->negated = true;
        }
        e->name = expect_name("a test name after 'is'");
        e->args.push_back(std::move(left));
        if (is_op("(")) {
          parse_call_args(*e);
        } else if (peek().kind == K::string || peek().kind == K::integer || peek().kind == K::floating) {
          e->args.push_back(parse_primary());  // `is equalto 3`
        }
        left = std::move(e);
      } else {
        return left;
      }
    }
  }
  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_concat(), t.line);
    }
    return left;
  }
  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }
  ExprPtr parse_math2() {
    ExprPtr left = parse_unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_unary(), t.line);
    }
    return left;
  }
  ExprPtr parse_unary() {
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      auto e = make(Expr::Kind::unary, t.line);
      e->name = t.text;
      e->args.push_back(parse_unary());
      return e;
    }
    ExprPtr base = parse_postfix(parse_primary());
    if (is_op("**")) {
      const int line = next().line;
      base = binary("**", std::move(base), parse_unary(), line);
    }
    return base;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == K::name && is_op("=", 1)) {
        std::string key = next().text;
        ++pos_;
        e.kwargs.emplace_back(std::move(key), parse_expr());
      } else {
        e.args.push_back(parse_expr());
      }
      if (!is_op(")")) expect_op(",");
    }
    ++pos_;
  }

  ExprPtr parse_postfix(ExprPtr base) {
    while (true) {
      const int line = peek().line;
      if (is_op(".")) {
        ++pos_;
        auto e = make(Expr::Kind::get_attr, line);
        e->name = expect_name("an attribute name after '.'");
        e->args.push_back(std::move(base));
        base = std::move(e);
      } else if (is_op("[")) {
        ++pos_;
        ExprPtr parts[3];
        int n_colons = 0;
        while (!is_op("]")) {
          if (is_op(":")) {
            if (++n_colons > 2) fail("too many ':' in a slice");
            ++pos_;
            continue;
          }
          if (parts[n_colons]) fail("expected ']' or ':' but found " + describe(peek()));
          parts[n_colons] = parse_expr();
        }
        ++pos_;
        auto e = make(n_colons ? Expr::Kind::slice : Expr::Kind::get_item, line);
        if (!n_colons && !parts[0]) fail("empty subscript '[]'");
        e->args.push_back(std::move(base));
        for (int i = 0; i <= (n_colons ? 2 : 0); ++i) e->args.push_back(std::move(parts[i]));
        base = std::move(e);
      } else if (is_op("(")) {
        auto e = make(Expr::Kind::call, line);
        e->args.push_back(std::move(base));
        parse_call_args(*e);
        base = std::move(e);
      } else if (is_op("|")) {
        ++pos_;
        auto e = make(Expr::Kind::filter, line);
        e->name = expect_name("a filter name after '|'");
        e->args.push_back(std::move(base));
        if (is_op("(")) parse_call_args(*e);
        base = std::move(e);
      } else {
        return base;
      }
    }
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    auto e = make(Expr::Kind::literal, t.line);
    switch (t.kind) {
      case K::string: {
        std::string s = next().text;
        while (peek().kind == K::string) s += next().text;  // adjacent literals concatenate
        e->value = Value(std::move(s));
        return e;
      }
      case K::integer: e->value = Value(static_cast<int64_t>(std::stoll(next().text))); return e;
      case K::floating: e->value = Value(std::stod(next().text)); return e;
      case K::name: {
        const std::string name = next().text;
        if (name == "true" || name == "True") e->value = Value(true);
        else if (name == "false" || name == "False") e->value = Value(false);
        else if (name == "none" || name == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::name;
          e->name = name;
        }
        return e;
      }
      case K::op:
        if (t.text == "(") {
          ++pos_;
          ExprPtr first = is_op(")") ? nullptr : parse_expr();
          if (first && is_op(")")) {
            ++pos_;
            return first;
          }
          e->kind = Expr::Kind::tuple;
          if (first) e->args.push_back(std::move(first));
          while (!is_op(")")) {
            expect_op(",");
            if (is_op(")")) break;
            e->args.push_back(parse_expr());
          }
          ++pos_;
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          e->kind = Expr::Kind::list;
          while (!is_op("]")) {
            e->args.push_back(parse_expr());
            if (!is_op("]")) expect_op(",");
          }
          ++pos_;
          return e;
        }
        if (t.text == "{") {
          ++pos_;
          e->kind = Expr::Kind::dict;
          while (!is_op("}")) {
            e->dict_keys.push_back(parse_expr());
            expect_op(":");
            e->args.push_back(parse_expr());
            if (!is_op("}")) expect_op(",");
          }
          ++pos_;
          return e;
        }
        break;
      default: break;
    }
    fail("expected an expression but found " + describe(t));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize_template(source)).parse_all(); }

}  // namespace loom::jinja
