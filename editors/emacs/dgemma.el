;;; dgemma.el --- Ghost text from DiffusionGemma via lsp-mode  -*- lexical-binding: t; -*-

;; Copyright 2026 The dgemma-lsp authors
;; SPDX-License-Identifier: Apache-2.0

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (lsp-mode "10.0.0"))
;; Keywords: languages, tools, convenience

;;; Commentary:

;; Registers the dgemma-lsp language server with lsp-mode, as an add-on
;; server that runs beside whatever server a buffer already has.  lsp-mode's
;; inline completion (lsp-inline-completion.el, lsp-mode 10.0.0 and newer)
;; shows its suggestions as ghost text while you type:
;;
;;   TAB or C-c C-a   accept the suggestion shown (TAB indents when none is)
;;   C-n / C-p        other candidates (server option completion.candidates)
;;   any other key    dismisses it
;;
;; The mode line shows the model, the device and the last completion's
;; latency, from the server's `dgemma/status' notification (which the server
;; sends because this client declares that it handles it).
;;
;; Setup (see editors/emacs/README.md):
;;
;;   (require 'dgemma)
;;   (add-hook 'python-mode-hook #'lsp-deferred)
;;
;; dgemma requires each part of lsp-mode it needs, so it also works where
;; lsp-mode's autoloads are missing (lsp-mode on `load-path', no package.el).

;;; Code:

(require 'lsp-mode)
;; lsp-mode reaches these through package.el's autoloads when it sets up a
;; buffer; without them that fails with void-function (lsp-lens--enable, ...).
(require 'lsp-completion)
(require 'lsp-diagnostics)
(require 'lsp-headerline)
(require 'lsp-lens)
(require 'lsp-modeline)
(require 'lsp-semantic-tokens)
(require 'lsp-inline-completion)

(defgroup dgemma nil
  "Code completions from a local DiffusionGemma model (dgemma-lsp)."
  :group 'lsp-mode
  :prefix "dgemma-")

(defcustom dgemma-server-command '("dgemma-lsp" "--stdio")
  "The server command and its arguments.
Use the full path of the command when it is not on `exec-path'."
  :type '(repeat string))

(defcustom dgemma-server-options nil
  "Server options, sent as initializationOptions.
A plist with the server's camelCase names, for example
\(:model \"default\" :device \"cpu\" :completion (:latencyBudgetMs 300))."
  :type 'plist)

(defcustom dgemma-major-modes
  '(python-mode python-ts-mode js-mode js-ts-mode typescript-mode
    typescript-ts-mode tsx-ts-mode lua-mode lua-ts-mode rust-mode rust-ts-mode
    go-mode go-ts-mode c-mode c-ts-mode c++-mode c++-ts-mode java-mode
    java-ts-mode sh-mode bash-ts-mode)
  "Major modes, and the modes derived from them, that dgemma-lsp serves."
  :type '(repeat symbol))

(defcustom dgemma-idle-delay 0.3
  "Seconds without input after a change before a suggestion is asked for.
It sets `lsp-inline-completion-idle-delay' in the buffers dgemma-lsp
serves: lsp-mode's default, 2 seconds, is long for typing."
  :type 'number)

(defun dgemma--set-accept-keys (symbol keys)
  "Set SYMBOL to KEYS, and make KEYS accept the suggestion shown.
They are bound in `lsp-inline-completion-active-map', which is active
only while a suggestion is shown: otherwise they do what they always do."
  (when (boundp symbol)
    (dolist (key (symbol-value symbol))
      (define-key lsp-inline-completion-active-map (kbd key) nil)))
  (set-default symbol keys)
  (dolist (key keys)
    (define-key lsp-inline-completion-active-map (kbd key)
                #'lsp-inline-completion-accept)))

(defcustom dgemma-accept-keys '("TAB" "C-c C-a")
  "Keys that accept the suggestion shown, in a terminal and in a GUI.
lsp-mode's own, C-<return>, never reaches Emacs in a terminal."
  :type '(repeat string)
  :set #'dgemma--set-accept-keys)

(defun dgemma--workspace ()
  "The dgemma-lsp workspace of the current buffer, or nil."
  (seq-find (lambda (workspace)
              (eq (lsp--client-server-id (lsp--workspace-client workspace))
                  'dgemma))
            (lsp-workspaces)))

(defun dgemma--activate-p (_file-name mode)
  "Whether dgemma-lsp serves a buffer in major MODE."
  (apply #'provided-mode-derived-p mode dgemma-major-modes))

(defun dgemma-status-text (status)
  "The mode-line text for STATUS, the params of a `dgemma/status'."
  (let* ((model (lsp-get status :model))
         (name (if (and (stringp model) (not (string-empty-p model)))
                   (file-name-nondirectory (directory-file-name model))
                 "model"))
         (device (lsp-get status :device))
         (latency (lsp-get status :lastLatencyMs)))
    (pcase (lsp-get status :state)
      ("ready" (string-join
                (delq nil (list "dgemma:" name device
                                (and (numberp latency)
                                     (format "%dms" (round latency)))))
                " "))
      ("failed" (format "dgemma: %s failed" name))
      ("loading" (format "dgemma: loading %s" name))
      (_ "dgemma: loading"))))

(defvar-local dgemma--status-text "dgemma: loading"
  "What the mode line shows of the server's last `dgemma/status'.")

(define-minor-mode dgemma-mode
  "Show dgemma-lsp's status in the mode line of a buffer it serves.
lsp-mode turns it on in those buffers."
  :lighter (:eval (concat " " dgemma--status-text)))

(defun dgemma--on-status (workspace status)
  "Show STATUS, a `dgemma/status' from WORKSPACE, in its buffers' mode line."
  (let ((text (dgemma-status-text status)))
    (dolist (buffer (lsp--workspace-buffers workspace))
      (when (lsp-buffer-live-p buffer)
        (lsp-with-current-buffer buffer
          (setq dgemma--status-text text)))))
  (force-mode-line-update t))

(defun dgemma--configure-buffer ()
  "In a buffer dgemma-lsp serves: its status, and suggestions asked sooner."
  (when (dgemma--workspace)
    (setq-local lsp-inline-completion-idle-delay dgemma-idle-delay)
    (dgemma-mode 1)))

(defun dgemma--unconfigure-buffer ()
  "Turn `dgemma-mode' off when lsp-mode leaves the buffer."
  (dgemma-mode -1))

(add-hook 'lsp-configure-hook #'dgemma--configure-buffer)
(add-hook 'lsp-unconfigure-hook #'dgemma--unconfigure-buffer)

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () dgemma-server-command))
  :activation-fn #'dgemma--activate-p
  :server-id 'dgemma
  :add-on? t
  :priority -1
  :initialization-options (lambda () dgemma-server-options)
  ;; The server sends custom notifications only to clients that declare them.
  :custom-capabilities '((experimental . ((dgemma . ((status . t))))))
  :notification-handlers (ht ("dgemma/status" #'dgemma--on-status))))

(provide 'dgemma)
;;; dgemma.el ends here
