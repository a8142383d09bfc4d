---@brief Pure text helpers: what a partial accept takes from a suggestion. Unit-tested headless.

local M = {}

---The next word of `text`: leading whitespace, then a run of word characters or of other
---non-blank characters (VS Code's "accept next word" does the same).
---@param text string
---@return string
function M.next_word(text)
  local ws = text:match("^%s*")
  local rest = text:sub(#ws + 1)
  if rest == "" then
    return text
  end
  local word = rest:match("^[%w_]+") or rest:match("^[^%w_%s]+")
  return ws .. word
end

---The rest of the current line of `text`; a suggestion that starts with a line break gives that
---break and the next line.
---@param text string
---@return string
function M.next_line(text)
  local nl = text:find("\n", 1, true)
  if not nl then
    return text
  end
  if nl == 1 then
    local second = text:find("\n", 2, true)
    return second and text:sub(1, second - 1) or text
  end
  return text:sub(1, nl - 1)
end

---The part of `suggestion` not typed yet, when `typed` (what the buffer holds between the point the
---suggestion was made for and the cursor) is a prefix of it; nil when the user typed something else.
---@param suggestion string
---@param typed string
---@return string|nil
function M.remaining(suggestion, typed)
  if typed == "" then
    return suggestion
  end
  if suggestion:sub(1, #typed) == typed then
    return suggestion:sub(#typed + 1)
  end
  return nil
end

return M
